"""Transport security: mutual TLS settings and credentials (:mod:`.tls`), a private cluster CA (:mod:`.ca`), and
principals from client certificates with Kafka's mapping rules (:mod:`.principal`).

Not wired into the node, the peer transport, the brokers or the CLIs yet: these are the pieces they will use.
"""
