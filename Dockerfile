# pykraft: one image (pykraft:local in docker-compose.yml) for controller nodes and broker agents. The audit extra
# (Spark, pandas) is left out: `pykraft audit` reads an export, and runs where Spark is.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/pykraft
COPY pyproject.toml README.md LICENSE ./
COPY quorum ./quorum
COPY controller ./controller
COPY broker ./broker
COPY pykraft ./pykraft
COPY audit ./audit
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 pykraft \
    && mkdir /data /tls && chown pykraft:pykraft /data /tls
# Not root. /data and /tls belong to the user, so named volumes mounted there start out writable by it (/tls: the
# certificates docker-compose.tls.yml has `pykraft tls create` make).
USER pykraft
WORKDIR /data
# 9093: the voters' and brokers' listener; 9094: the external listener for clients outside the network (both
# `pykraft node`); 9100: Prometheus metrics (--metrics-port).
EXPOSE 9093 9094 9100
ENTRYPOINT ["pykraft"]
