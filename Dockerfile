# syntax=docker/dockerfile:1
# Build: compile TypeScript and native addons with the toolchain; runtime: only what the service runs.
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# patch-package applies them after install (postinstall): see patches/README.md. The install script builds
# the ECDSA signer in workers/native against Node's headers.
COPY patches ./patches
COPY workers/native ./workers/native
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
# libsofthsm2 provides a PKCS#11 module for the pkcs11 CA key backend; mount a real HSM's module instead in production.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini libsofthsm2 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system svc && useradd --system --gid svc --home-dir /app --shell /usr/sbin/nologin svc
WORKDIR /app
ENV NODE_ENV=production \
    SVC_DATA_DIR=/app/.data
COPY --from=build --chown=svc:svc /app/package.json ./
COPY --from=build --chown=svc:svc /app/node_modules ./node_modules
COPY --from=build --chown=svc:svc /app/dist ./dist
COPY --from=build --chown=svc:svc /app/workers/native/build/Release/ecdsa_signer.node ./workers/native/build/Release/ecdsa_signer.node
COPY --chown=svc:svc sql ./sql
# GraphQL SDL is read from the source tree at start.
COPY --chown=svc:svc src ./src
RUN mkdir -p /app/.data && chown svc:svc /app/.data
USER svc
VOLUME ["/app/.data"]
EXPOSE 8080 8008 9009 8082 1883 8883 8081 8443 8089 5683/udp
HEALTHCHECK --interval=15s --timeout=3s CMD ["node", "-e", "fetch('http://127.0.0.1:8080/health/live').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/main.js"]
