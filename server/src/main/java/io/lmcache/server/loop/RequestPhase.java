package io.lmcache.server.loop;

/**
 * A STORE's or RETRIEVE's request path outside its handler ({@code request_path_cpu} in /status): waiting for its
 * transfer lane's thread (received on the socket thread until the lane runs it), decoding the payload, the handler, and
 * encoding and queueing the reply.
 */
public enum RequestPhase { QUEUE, DECODE, HANDLE, REPLY }
