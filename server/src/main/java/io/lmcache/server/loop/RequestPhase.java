package io.lmcache.server.loop;

/**
 * A STORE's or RETRIEVE's request path outside its handler ({@code request_path_cpu} in /status): waiting for its
 * transfer lane's thread (received on the socket thread until the lane runs it), decoding the payload, the handler,
 * encoding and queueing the reply, and the reply's wait in the queue until the socket thread hands it to JeroMQ
 * ({@code SEND}: the socket thread's wake-up when it slept). SEND is timed to tell that wake-up from the handler when a
 * request is slow; a fresh server's one-chunk gap turned out to be the handler's (bench/journal/2026-12-07-request-timelines.md).
 */
public enum RequestPhase { QUEUE, DECODE, HANDLE, REPLY, SEND }
