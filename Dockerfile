# syntax=docker/dockerfile:1
#
# service-mcp in a container: docs/deploy/README.md ("Docker") says how to run it.
#
#   docker build -t service-mcp .
#   docker run -d --name service-mcp -p 127.0.0.1:3000:3000 -v service-mcp-data:/data \
#     -e SERVICE_BASE_URL=https://mcp.example.com service-mcp
#   docker logs service-mcp        # the first start prints the owner's password and API key, once
#
# Both stages use the same Debian and Node, so the SQLite addon compiled in the first runs in the second. Node 26 is the
# active LTS (22 and 24 are tested too: scripts/node-versions/installs).
ARG NODE_VERSION=26

FROM node:${NODE_VERSION}-bookworm-slim AS build
# better-sqlite3 is compiled from source (.prebuild-installrc: buildFromSource), against the headers this image ships,
# so nothing is downloaded besides npm packages and Debian's compilers. Node's Linux binaries need libatomic from
# Node 25 on.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ libatomic1 \
 && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json .prebuild-installrc ./
# Dependencies only (a layer cached until the lockfile changes). Only better-sqlite3 needs its install script
# (package.json "allowScripts"), so scripts are off and it alone is built.
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# tini as PID 1: it forwards SIGTERM to node (a clean stop, see below) and reaps what deployment pipelines leave.
# libatomic: Node's Linux binaries need it from Node 25 on.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini libatomic1 \
 && rm -rf /var/lib/apt/lists/*
# A numeric, non-root user (Kubernetes' runAsNonRoot can check it) that owns /data and nothing else.
RUN groupadd --system --gid 10001 service-mcp \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /data --shell /usr/sbin/nologin service-mcp \
 && mkdir /data && chown 10001:10001 /data && chmod 700 /data
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Read at run time: the migrations, and the pipeline supervisor with the example pipeline.
COPY drizzle ./drizzle
COPY scripts/pipelines ./scripts/pipelines
COPY LICENSE README.md CHANGELOG.md ./

# The database, its -wal and -shm files and env.key (the key that encrypts env var values, created beside the
# database on first start) all live in /data: back the volume up whole, key included.
ENV NODE_ENV=production \
    SERVICE_DATABASE=/data/service.db \
    SERVICE_HOST=0.0.0.0 \
    SERVICE_PORT=3000
# SERVICE_BASE_URL is yours to set (docker run -e SERVICE_BASE_URL=https://mcp.example.com): listening on 0.0.0.0,
# the server refuses to start without it, as it cannot guess the address clients use. No secret is baked in: the
# owner's password and API key are generated on first start, or given with -e SERVICE_BOOTSTRAP_PASSWORD/_API_KEY.
VOLUME /data
EXPOSE 3000
USER 10001:10001

# No curl in a slim image: node asks /healthz itself.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.SERVICE_PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/cli.js", "serve"]
# docker stop sends SIGTERM: requests in flight end (within SERVICE_STOP_SETTLE_MS, 3 s), then running deployments are
# interrupted (SIGKILL after SERVICE_PIPELINE_GRACE_MS, 5 s) and the calls waiting on them answered. Docker's own wait
# before SIGKILL is 10 s; give it more if you raise either: docker stop -t 30, or stop_grace_period in Compose.
STOPSIGNAL SIGTERM
