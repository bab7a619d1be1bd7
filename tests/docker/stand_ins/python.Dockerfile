# Stand-in for python:3.11-slim where no registry can be reached: Debian bookworm's own Python 3.11 on a
# debootstrap minbase root, with the `python` and `pip` names and the global pip the official image has.
ARG DEBIAN_BASE
FROM ${DEBIAN_BASE}
ENV LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /usr/bin/python3 /usr/local/bin/python \
 && ln -s /usr/bin/pip3 /usr/local/bin/pip \
 && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED
CMD ["python3"]
