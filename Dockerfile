# The edge image: the `clientmcp` command frozen into one folder with its own libraries, on
# scratch, run as an unprivileged user. No shell, no package manager, no Python tree.
# docs/deployment.md says what is in it, why, and how it is built and verified.
#
#   docker build -t clientmcp .
#   docker run -d -p 8080:8080 -e CLIENTMCP_SECRET clientmcp
#   docker run --rm -e CLIENTMCP_SECRET clientmcp token agent my-app --ttl 30d

FROM docker.io/library/debian:bookworm-slim AS build
# Debian's own Python 3.11 (its shared libpython is what PyInstaller bundles), a C compiler
# for the compiled extensions, and binutils for PyInstaller's strip.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-dev python3-venv gcc libc6-dev binutils \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /venv
COPY packaging/requirements.txt /src/packaging/requirements.txt
RUN /venv/bin/pip install --quiet -r /src/packaging/requirements.txt
COPY . /src
WORKDIR /src
# The extensions must build: an image that fell back to pure Python would be slower unnoticed.
# The `nats` extra (nats-py) is frozen in, so that `serve --nats` joins a cluster (docs/scaling.md).
RUN CLIENTMCP_BUILD_EXTENSION=yes /venv/bin/pip install --quiet --no-build-isolation '.[nats]' \
 && /venv/bin/python packaging/freeze.py rootfs /rootfs

# `make binary`: the single static file (PyInstaller one-file, then staticx), written out of
# the builder as dist/clientmcp by `docker build --target binary --output dist .`
FROM build AS single
RUN /venv/bin/pip install --quiet -r packaging/requirements-single.txt \
 && /venv/bin/python packaging/freeze.py single /single/clientmcp
FROM scratch AS binary
COPY --from=single /single/clientmcp /clientmcp

# The image.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s CMD ["/clientmcp/clientmcp", "health"]
ENTRYPOINT ["/clientmcp/clientmcp"]
