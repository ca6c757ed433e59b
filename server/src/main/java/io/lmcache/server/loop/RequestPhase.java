package io.lmcache.server.loop;

/**
 * A STORE's or RETRIEVE's request path outside its handler ({@code request_path_cpu} in /status): waiting for its
 * transfer lane's thread (received on the socket thread until the lane runs it), decoding the payload, the handler,
 * encoding and queueing the reply, and the reply's wait in the queue until the socket thread hands it to JeroMQ
 * ({@code SEND}: the socket thread's wake-up when it slept). SEND is timed because a fresh server's one-chunk requests lost
 * their time against a warm one's outside the handler (bench/journal/2026-12-07-pin-sweep-wait.md).
 */
public enum RequestPhase { QUEUE, DECODE, HANDLE, REPLY, SEND }
