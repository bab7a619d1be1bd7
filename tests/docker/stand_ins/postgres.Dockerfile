# Stand-in for postgres:16 where no registry can be reached: Debian bookworm's PostgreSQL 15 with an
# entrypoint that honours the official image's contract (POSTGRES_USER / _PASSWORD / _DB, scripts in
# /docker-entrypoint-initdb.d on first start, data in /var/lib/postgresql/data, pg_isready on PATH).
ARG DEBIAN_BASE
FROM ${DEBIAN_BASE}
ENV LANG=C.UTF-8 \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
# No cluster at install time: the entrypoint creates one from the environment on first start.
RUN mkdir -p /etc/postgresql-common \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /docker-entrypoint-initdb.d "$PGDATA" /var/run/postgresql \
 && chown postgres:postgres "$PGDATA" /var/run/postgresql \
 && chmod 700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
USER postgres
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
