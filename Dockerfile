# Tollgate container image.
#
#   docker build -t tollgate .
#
# NODE_IMAGE picks the Node 24 base for both stages. The default is the official Debian slim image; a
# machine that cannot pull it makes a local one with scripts/make-base-image.sh and builds with
#   docker build --network host --build-arg NODE_IMAGE=tollgate-node-base:24 -t tollgate .
# Every RUN uses the exec form, so the base needs no shell (the local one has none).
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: all dependencies, compile TypeScript, then drop the dev dependencies ----
FROM ${NODE_IMAGE} AS build
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

# ---- runtime: production dependencies and compiled JavaScript only ----
FROM ${NODE_IMAGE} AS runtime
ARG VERSION=dev
LABEL org.opencontainers.image.title="tollgate" \
      org.opencontainers.image.description="Reverse proxy with built-in authentication for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
ENV NODE_ENV=production \
    TOLLGATE_CONFIG=/etc/tollgate/main.yaml
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
EXPOSE 8080 8081 9090
# node itself is PID 1 (not npm, which does not forward SIGTERM); Tollgate handles SIGTERM/SIGINT.
ENTRYPOINT ["node", "/app/dist/main.js"]
CMD ["start", "--config", "/etc/tollgate/main.yaml"]
