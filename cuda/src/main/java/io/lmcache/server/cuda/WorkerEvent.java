package io.lmcache.server.cuda;

import jcuda.driver.CUevent;

/** A transfer's worker event: the handle its request carried, and where it may wait opened already ({@link OpenedAhead}). */
record WorkerEvent(byte[] handle, OpenedAhead<CUevent> ahead) {}
