"""PostgreSQL for a served study: a persistent connection's health check costs no round trip.

Django's health check (``CONN_HEALTH_CHECKS``) sends ``SELECT 1`` before the first statement
of every request that reuses a connection: a round trip of its own, one in each of the serving
loop's requests (docs/serving.md, "Round trips"). A connection the server ended (a restart, a
failover, ``pg_terminate_backend``, an idle timeout) has its socket readable at once: the
server's last message and the end of the stream wait there. So the check here asks the socket
first, without waiting: nothing to read on a connection idle since its last statement means
the server sent nothing and ended nothing, and the connection is used as it is; anything to
read (or a connection psycopg already knows broken) means Django's ``SELECT 1``, as before,
which closes the connection if the server is gone. A connection lost without a word (a network
cut) is found by the statement that uses it, as it was when ``SELECT 1`` waited for it: the
serving loop's requests retry on a fresh connection (annotation/services/transactions.py).
"""
