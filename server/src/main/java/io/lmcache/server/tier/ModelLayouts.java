package io.lmcache.server.tier;

/**
 * What the workers' registrations say of each model, for L2: {@code shapes}, which objects a LOOKUP's keys have and which
 * world size wrote a stored object; {@code lookups}, which models' LOOKUPs load from L2 (skip_l1 keeps the others' objects
 * in L1).
 */
public record ModelLayouts(ObjectShapes shapes, StoreController.L2Lookups lookups) {}
