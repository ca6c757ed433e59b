package io.lmcache.server.transfer;

import io.lmcache.server.cuda.DeviceTensors;

/**
 * A GPU worker's KV tensors, opened through CUDA IPC. The mappings keep the worker's memory alive
 * even if its process dies, so they are always reachable; the reaper or UNREGISTER closes them.
 */
public final class DeviceKvTensors implements KvTensors {
    private final DeviceTensors tensors;

    public DeviceKvTensors(DeviceTensors tensors) {
        this.tensors = tensors;
    }

    public DeviceTensors tensors() {
        return tensors;
    }

    @Override
    public String checkAlive() {
        return null;
    }

    @Override
    public void close() {
        tensors.close();
    }
}
