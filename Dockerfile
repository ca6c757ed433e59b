# lmcache-server: build with Maven, run on a small Java 25 runtime as a non-root user.
# docker build -t lmcache-server .
# docker run --ipc=host --gpus all -p 5555:5555 -p 8080:8080 lmcache-server --l1-size-gb 20

FROM maven:3.9-eclipse-temurin-25 AS build
WORKDIR /src
# dependencies first, so a code change does not download them again
COPY pom.xml ./
COPY protocol/pom.xml protocol/
COPY config/pom.xml config/
COPY cuda/pom.xml cuda/
COPY server/pom.xml server/
COPY bench/pom.xml bench/
RUN mvn -B -q -pl server -am dependency:go-offline
COPY protocol protocol
COPY config config
COPY cuda cuda
COPY server server
COPY bin bin
RUN mvn -B -q -pl server -am -DskipTests package

FROM eclipse-temurin:25-jre
# curl serves the HEALTHCHECK
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 lmcache \
 && useradd --system --uid 10001 --gid lmcache --home-dir /opt/lmcache-server --shell /usr/sbin/nologin lmcache
WORKDIR /opt/lmcache-server
# the same layout as a source checkout, so bin/lmcache-server runs unchanged (it finds the jar built)
COPY --from=build /src/server/target/lmcache-server.jar server/target/lmcache-server.jar
COPY --from=build /src/server/target/lib server/target/lib
COPY --from=build /src/bin/lmcache-server bin/lmcache-server
RUN ln -s /opt/lmcache-server/bin/lmcache-server /usr/local/bin/lmcache-server
USER lmcache
# ZeroMQ requests, HTTP status/metrics, the optional separate metrics port
EXPOSE 5555 8080 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthcheck || exit 1
ENTRYPOINT ["lmcache-server"]
CMD ["--host", "0.0.0.0", "--port", "5555", "--http-port", "8080", "--l1-size-gb", "4"]
