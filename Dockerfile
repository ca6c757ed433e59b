# lmcache-server: built with Maven, run on a jlinked Java 25 runtime (about 50 MB) as a non-root user.
#   docker build --build-arg LMCACHE_COMMIT=$(git rev-parse HEAD) -t lmcache-server .
#   docker run --ipc=host --gpus all -p 5555:5555 -p 8080:8080 lmcache-server --l1-size-gb 20
# `lmcache server ...` works too: /opt/venv/bin/lmcache is where LMCache's Kubernetes operator looks.
# Without access to Docker Hub, deploy/container/make-local-base-images.sh makes the two base images locally.

FROM maven:3.9-eclipse-temurin-25 AS build
WORKDIR /src
# a C compiler for the CPU path's native copy (server/src/main/c/build.sh; without one the server copies in Java)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
# dependencies first, so a code change does not download them again; every module of pom.xml's <modules> needs its
# pom here (the reactor refuses a missing one), the server's modules their sources (DockerfileCoverageIT holds both)
COPY pom.xml ./
COPY protocol/pom.xml protocol/
COPY config/pom.xml config/
COPY l2/pom.xml l2/
COPY cuda/pom.xml cuda/
COPY server/pom.xml server/
COPY bench/pom.xml bench/
RUN mvn -B -q -pl server -am dependency:go-offline
# the modules the server and the lmcache CLI use (jdeps), java.xml for a logback file given with -Dlogback.configurationFile;
# --strip-java-debug-attributes, not --strip-debug: that one also strips native symbols with objcopy, which the image may lack
RUN jlink --add-modules java.base,java.logging,java.management,java.naming,java.net.http,java.xml,jdk.httpserver,jdk.management,jdk.unsupported \
      --strip-java-debug-attributes --no-header-files --no-man-pages --compress=zip-6 --output /opt/java/runtime
COPY protocol protocol
COPY config config
COPY l2 l2
COPY cuda cuda
COPY server server
COPY bin bin
# declared here, not above: a new commit reruns only what follows (podman and docker key every later RUN on its value)
ARG LMCACHE_COMMIT=unknown
RUN mvn -B -q -pl server -am -DskipTests -Dlmcache.commit="${LMCACHE_COMMIT}" package
# JCuda's natives jar carries four libraries; the server loads one, libJCudaDriver (the driver API: jcuda.driver.JCudaDriver's
# class initialiser), never the runtime's, NVRTC's or the 24 MB PTX compiler's (the kernels are PTX the driver loads itself).
# The image keeps that one; before the training below, which records the class path's jars as they are
RUN cd server/target/lib && for natives in jcuda-natives-*.jar; do \
      mkdir unpacked && (cd unpacked && jar xf "../$natives" && rm -f lib/libJNvPTXCompiler-* lib/libJCudaRuntime-* lib/libJNvrtc-*) \
      && ls unpacked/lib/libJCudaDriver-* >/dev/null \
      && jar --create --file "$natives" --manifest unpacked/META-INF/MANIFEST.MF -C unpacked lib -C unpacked META-INF/maven \
      && rm -rf unpacked; \
    done
# the ahead-of-time cache (the JIT's cold start, issue 30), trained on the runtime the image runs (a cache matches only the
# JVM that made it; moved with the jar and lib/ to /opt/lmcache-server it still matches); the driver runs on the build JDK
RUN LMCACHE_AOT_DRIVER_JAVA="$(command -v java)" JAVA_HOME=/opt/java/runtime bin/lmcache-aot-train server/target/lmcache-server.aot

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="lmcache-server" \
      org.opencontainers.image.description="Java drop-in for LMCache's multiprocess KV-cache server (lmcache server), vLLM's LMCacheMPConnector sidecar" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
RUN groupadd --system --gid 10001 lmcache \
 && useradd --system --uid 10001 --gid lmcache --home-dir /opt/lmcache-server --shell /usr/sbin/nologin lmcache
ENV JAVA_HOME=/opt/java/runtime
COPY --from=build /opt/java/runtime /opt/java/runtime
WORKDIR /opt/lmcache-server
# the same layout as a source checkout, so the launchers run unchanged (they find the jar built)
COPY --from=build /src/server/target/lmcache-server.jar server/target/lmcache-server.jar
COPY --from=build /src/server/target/lib server/target/lib
# COPY keeps the files' times, which the cache checks against the jar's
COPY --from=build /src/server/target/lmcache-server.aot server/target/lmcache-server.aot
COPY --from=build /src/bin/lmcache-server /src/bin/lmcache /src/bin/lmcache-healthcheck bin/
COPY LICENSE LICENSE
# on PATH through links (the launchers find their real location), and where LMCache's operator runs `lmcache server`
RUN ln -s /opt/lmcache-server/bin/lmcache-server /usr/local/bin/lmcache-server \
 && ln -s /opt/lmcache-server/bin/lmcache /usr/local/bin/lmcache \
 && mkdir -p /opt/venv/bin && ln -s /opt/lmcache-server/bin/lmcache /opt/venv/bin/lmcache
ARG LMCACHE_COMMIT=unknown
LABEL org.opencontainers.image.revision="${LMCACHE_COMMIT}"
USER lmcache
# ZeroMQ requests, HTTP status/metrics, the optional separate metrics port
EXPOSE 5555 8080 9090
# bash alone (no curl): GET /healthcheck on the --http-port the server was started with
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/opt/lmcache-server/bin/lmcache-healthcheck"]
ENTRYPOINT ["lmcache-server"]
CMD ["--host", "0.0.0.0", "--port", "5555", "--http-port", "8080", "--l1-size-gb", "4"]
