# pykraft: one image for controller nodes and broker agents.
FROM python:3.11-slim
WORKDIR /opt/pykraft
COPY pyproject.toml README.md ./
COPY quorum ./quorum
COPY controller ./controller
COPY broker ./broker
COPY pykraft ./pykraft
COPY audit ./audit
RUN pip install --no-cache-dir .
ENTRYPOINT ["pykraft"]
