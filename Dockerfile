# Tollgate container image.
#
#   docker build -t tollgate .
#
# Two bases: NODE_IMAGE (Node 24 with npm) for the build stage, RUNTIME_IMAGE for what ships. The
# runtime is distroless: node and its libraries only, no shell, no npm, no corepack. A machine that
# cannot pull them makes local ones with scripts/make-base-image.sh and builds with
#   docker build --network host --build-arg NODE_IMAGE=tollgate-node-base:24 \
#     --build-arg RUNTIME_IMAGE=tollgate-node-runtime:24 -t tollgate .
# Every RUN uses the exec form, so no stage needs a shell.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12

# ---- build: all dependencies, compile TypeScript, then drop the dev dependencies ----
# On the build machine's own platform: the output is JavaScript and the production dependencies have
# no native code, so one build serves every target architecture (no emulation in multi-arch builds).
# BuildKit sets BUILDPLATFORM; the legacy builder (no buildx) leaves it empty and builds one platform.
FROM --platform=${BUILDPLATFORM:-linux/amd64} ${NODE_IMAGE} AS build
WORKDIR /build
COPY package.json package-lock.json ./
# --ignore-scripts: no runtime dependency needs an install script, and the `node` dev dependency's
# script would download a second Node binary the build does not use.
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
RUN ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
COPY tsconfig.json ./
COPY src ./src
# tsc directly (not `npm run build`): npm would need a shell to run the script.
RUN ["node", "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"]
RUN ["npm", "prune", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"]

# ---- runtime: node, production dependencies and compiled JavaScript only ----
FROM ${RUNTIME_IMAGE} AS runtime
ARG VERSION=dev
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Reverse proxy with built-in authentication for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
# MALLOC_ARENA_MAX=2: glibc otherwise gives each thread (libuv pool, V8 GC helpers) its own malloc
# arena, up to 8 per core, and freed memory stays spread over them (docs/deployment.md, "Memory").
ENV NODE_ENV=production \
    TOLLGATE_CONFIG=/etc/tollgate/main.yaml \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# Owned by root and not writable by the service user: the process cannot change its own code.
COPY --from=build /build/package.json ./package.json
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
# Config lives in /etc/tollgate (mount a ConfigMap-style directory there: main.yaml, upstreams.yaml,
# and the masterkey file if main.yaml names one). Nothing is written at run time, so the root
# filesystem can be read-only; /tmp is the only place a tmpfs/emptyDir is offered.
# A numeric non-root user, so Kubernetes can verify runAsNonRoot without a passwd entry.
USER 10001:10001
# 8080 proxy (HTTP), 8443 proxy (TLS, when proxy_address_tls is set), 8081 token API, 9090 admin.
EXPOSE 8080 8443 8081 9090
# node itself is PID 1 (no shell, no npm in between), so SIGTERM reaches Tollgate. /nodejs/bin/node is
# where the distroless image keeps it.
# --max-semi-space-size: see src/v8-launch-flags.ts and docs/benchmark.md (young-generation size).
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=8", "/app/dist/main.js"]
CMD ["start", "--config", "/etc/tollgate/main.yaml"]
