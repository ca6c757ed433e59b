package io.lmcache.server.cuda;

import java.lang.reflect.Field;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUpointer_attribute;
import jcuda.driver.JCudaDriver;

/**
 * Small helpers around JCuda's driver API: checked calls, the 64-byte IPC handles (JCuda keeps
 * them in a private field), and raw 64-bit device addresses (what the copy kernel's descriptors
 * hold).
 */
final class Cu {
    private static final Field MEM_HANDLE_BYTES = field(CUipcMemHandle.class);
    private static final Field EVENT_HANDLE_BYTES = field(CUipcEventHandle.class);

    private Cu() {}

    private static Field field(Class<?> type) {
        try {
            Field field = type.getDeclaredField("reserved");
            field.setAccessible(true);
            return field;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("JCuda's " + type.getSimpleName() + " has no 'reserved' field", e);
        }
    }

    /** Throws when a driver call did not return CUDA_SUCCESS. */
    static void check(int result, String what) {
        if (result != 0) {
            String[] name = new String[1];
            JCudaDriver.cuGetErrorName(result, name);
            throw new CudaException(what + " failed: " + (name[0] == null ? "CUDA error " + result : name[0]));
        }
    }

    static CUipcMemHandle memHandle(byte[] bytes) {
        CUipcMemHandle handle = new CUipcMemHandle();
        set(MEM_HANDLE_BYTES, handle, bytes);
        return handle;
    }

    static CUipcEventHandle eventHandle(byte[] bytes) {
        CUipcEventHandle handle = new CUipcEventHandle();
        set(EVENT_HANDLE_BYTES, handle, bytes);
        return handle;
    }

    static byte[] bytes(CUipcEventHandle handle) {
        try {
            return ((byte[]) EVENT_HANDLE_BYTES.get(handle)).clone();
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] bytes(CUipcMemHandle handle) {
        try {
            return ((byte[]) MEM_HANDLE_BYTES.get(handle)).clone();
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void set(Field field, Object handle, byte[] bytes) {
        if (bytes.length != 64) {
            throw new CudaException("a CUDA IPC handle has 64 bytes, got " + bytes.length);
        }
        try {
            System.arraycopy(bytes, 0, (byte[]) field.get(handle), 0, 64);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The raw 64-bit address behind a device pointer. */
    static long address(CUdeviceptr pointer) {
        long[] value = new long[1];
        check(JCudaDriver.cuPointerGetAttribute(Pointer.to(value), CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_POINTER, pointer),
                "cuPointerGetAttribute(DEVICE_POINTER)");
        return value[0];
    }
}
