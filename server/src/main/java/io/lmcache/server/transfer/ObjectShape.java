package io.lmcache.server.transfer;

/**
 * The stored object of one object group of a registered layout: its size and byte order. A LOOKUP
 * that loads from L2 reserves L1 objects of these shapes (LMCache passes the registration's
 * {@code group_layout_descs} to its adapters for the same reason). Today a registration has one
 * object group, 0; a hybrid registration lists one shape per group.
 */
public record ObjectShape(int objectGroup, long objectBytes, int format) {}
