# syntax=docker/dockerfile:1
# The `toolhost` container image: `toolhost serve --http` as a non-root
# process on a read-only root filesystem, with no shell. See docs/deploy.md.
#
#   docker build -t toolhost .            # or: buildah build -t toolhost .
#   docker run --rm --read-only -p 8080:8080 \
#     -e TOOLHOST_TOKEN=... \
#     -v toolhost-state:/var/lib/toolhost -v toolhost-cache:/var/cache/toolhost \
#     -v "$PWD/plugins:/opt/toolhost/plugins:ro" \
#     -v "$PWD/toolhost.toml:/etc/toolhost/toolhost.toml:ro" toolhost
#
# The arguments after the image name replace CMD (what to serve, and any
# flag of `toolhost serve`); the ENTRYPOINT keeps `serve --http 0.0.0.0:8080`.

ARG RUST_VERSION=1.95

# --- build: the release `toolhost`, with the Code Mode interpreter ---------
# cli/build.rs builds code-mode/ for wasm32-wasip2 and embeds it, so the
# build stage needs that target.
FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS build
# make builds jemalloc, the CLI's allocator (the slim image has only gcc).
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p toolhost-cli \
    && install -D -m 0755 target/release/toolhost /out/usr/local/bin/toolhost
# The directories the run stage needs, owned by the runtime user; in
# Kubernetes the writable ones are volumes (deploy/kubernetes/base).
RUN install -d -o 65532 -g 65532 -m 0700 /out/var/lib/toolhost /out/var/cache/toolhost \
    && install -d -m 0755 /out/etc/toolhost /out/opt/toolhost/plugins

# --- run: distroless (glibc, libgcc, CA certificates; no shell) ------------
# Debian 12 like the build stage, so the binary's glibc matches.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/usr/local/bin/toolhost /usr/local/bin/toolhost
COPY --from=build /out/etc/toolhost /etc/toolhost
COPY --from=build /out/opt/toolhost /opt/toolhost
COPY --from=build --chown=65532:65532 /out/var/lib/toolhost /var/lib/toolhost
COPY --from=build --chown=65532:65532 /out/var/cache/toolhost /var/cache/toolhost
# 65532 is distroless's `nonroot`; numeric, so `runAsNonRoot` can verify it.
USER 65532:65532
# Everything `toolhost` writes goes under these two directories (mount
# volumes there and run with a read-only root filesystem): the embedded
# store and retained outputs in the state directory (unused with
# TOOLHOST_STORE=postgres://...), compiled plugins in the cache.
ENV TOOLHOST_STATE_DIR=/var/lib/toolhost \
    TOOLHOST_CACHE_DIR=/var/cache/toolhost \
    XDG_STATE_HOME=/var/lib \
    XDG_CACHE_HOME=/var/cache \
    HOME=/var/lib/toolhost
VOLUME ["/var/lib/toolhost", "/var/cache/toolhost"]
WORKDIR /var/lib/toolhost
EXPOSE 8080
# No HEALTHCHECK: the image has no shell or HTTP client to run one, and
# `toolhost` has no probe subcommand. Probe HTTP instead: GET /healthz
# (alive) and /readyz (ready for traffic); Kubernetes does it with httpGet
# probes (deploy/kubernetes/base/deployment.yaml).
#
# Off loopback `serve` refuses to start without a bearer token: set
# TOOLHOST_TOKEN (or pass --token).
ENTRYPOINT ["/usr/local/bin/toolhost", "serve", "--http", "0.0.0.0:8080"]
CMD ["/etc/toolhost/toolhost.toml"]
