package io.lmcache.server.loop;

/** A reply on its way to the socket thread; {@code payload} null = no payload frame (a None reply). */
public record Outbound(byte[] identity, byte[] uid, byte[] op, byte[] payload) {}
