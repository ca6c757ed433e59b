package io.lmcache.server.cuda;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import jcuda.driver.CUdevice;
import jcuda.driver.CUuuid;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CUDA driver and this host's GPUs. {@link #open()} fails (and the server serves CPU workers
 * only) when there is no driver or no GPU. Devices are found by UUID in torch's format
 * ({@code str(torch.cuda.get_device_properties(i).uuid)}: 8-4-4-4-12 lowercase hex, no
 * {@code GPU-} prefix), never by index, which differs between processes.
 */
public final class CudaDevices implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CudaDevices.class);

    private final List<CudaDevice> devices;

    private CudaDevices(List<CudaDevice> devices) {
        this.devices = devices;
    }

    /** Loads JCuda's natives and the driver, and lists the GPUs. */
    public static CudaDevices open(long stackLimitBytes) {
        try {
            // the first touch of JCudaDriver unpacks and loads its native library: in a private directory
            NativeLibraryDir.loadPrivately(() -> JCudaDriver.setExceptionsEnabled(false));
            Cu.check(JCudaDriver.cuInit(0), "cuInit");
        } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
            String reason = String.valueOf(e.getMessage()).lines().findFirst().orElse("");
            throw new CudaException("the CUDA driver (libcuda) cannot be loaded: " + reason);
        }
        int[] count = new int[1];
        Cu.check(JCudaDriver.cuDeviceGetCount(count), "cuDeviceGetCount");
        if (count[0] == 0) {
            throw new CudaException("the CUDA driver reports no GPU");
        }
        List<CudaDevice> devices = new ArrayList<>();
        for (int ordinal = 0; ordinal < count[0]; ordinal++) {
            CUdevice device = new CUdevice();
            Cu.check(JCudaDriver.cuDeviceGet(device, ordinal), "cuDeviceGet(" + ordinal + ")");
            CUuuid uuid = new CUuuid();
            Cu.check(JCudaDriver.cuDeviceGetUuid(uuid, device), "cuDeviceGetUuid(" + ordinal + ")");
            byte[] name = new byte[256];
            Cu.check(JCudaDriver.cuDeviceGetName(name, name.length, device), "cuDeviceGetName(" + ordinal + ")");
            devices.add(new CudaDevice(ordinal, device, new CudaDevice.DeviceNames(formatUuid(uuid.bytes), cString(name), pciBusId(device)),
                    stackLimitBytes));
        }
        CudaDevices all = new CudaDevices(List.copyOf(devices));
        LOG.info("CUDA: {} GPU(s): {}", devices.size(), all.describe());
        return all;
    }

    /** The PCI bus id, lowercase as sysfs names it ({@code 0000:18:00.0}); "" when the driver does not say (needs no context). */
    private static String pciBusId(CUdevice device) {
        String[] id = new String[1];
        if (JCudaDriver.cuDeviceGetPCIBusId(id, 32, device) != 0 || id[0] == null) {
            return "";
        }
        return id[0].strip().toLowerCase(Locale.ROOT);
    }

    /** Torch's format of a device UUID: 8-4-4-4-12 lowercase hex. */
    public static String formatUuid(byte[] bytes) {
        String hex = HexFormat.of().formatHex(bytes);
        return hex.substring(0, 8) + "-" + hex.substring(8, 12) + "-" + hex.substring(12, 16) + "-" + hex.substring(16, 20) + "-"
                + hex.substring(20, 32);
    }

    /** Accepts torch's form, with or without nvidia-smi's {@code GPU-} prefix, any case. */
    public static String normalizeUuid(String uuid) {
        String bare = uuid.strip().toLowerCase(Locale.ROOT);
        return bare.startsWith("gpu-") ? bare.substring(4) : bare;
    }

    private static String cString(byte[] bytes) {
        int end = 0;
        while (end < bytes.length && bytes[end] != 0) {
            end++;
        }
        return new String(bytes, 0, end, StandardCharsets.UTF_8);
    }

    public List<CudaDevice> devices() {
        return devices;
    }

    public CudaDevice byUuid(String uuid) {
        String wanted = normalizeUuid(uuid);
        for (CudaDevice device : devices) {
            if (device.uuid().equals(wanted)) {
                return device;
            }
        }
        throw new CudaException("no GPU on this host has UUID " + uuid + " (this host has " + describe() + "); the worker and the server"
                + " must run on the same machine and see the same GPUs");
    }

    public String describe() {
        List<String> names = new ArrayList<>();
        for (CudaDevice device : devices) {
            names.add(device.ordinal() + ": " + device.name() + " " + device.uuid());
        }
        return String.join(", ", names);
    }

    @Override
    public void close() {
        for (CudaDevice device : devices) {
            device.close();
        }
    }
}
