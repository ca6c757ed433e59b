package io.lmcache.server.protocol;

import io.lmcache.server.protocol.ProtocolException.Reason;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.razorvine.pickle.IObjectConstructor;
import net.razorvine.pickle.Opcodes;
import net.razorvine.pickle.PickleException;
import net.razorvine.pickle.PickleUtils;
import net.razorvine.pickle.Unpickler;
import net.razorvine.pickle.objects.ClassDict;

/**
 * Decodes the pickled KV-tensor wrappers (msgpack ext type 1) with Pyrolite behind an allow-list:
 * a pickle that names any global other than the wrapper classes, {@code torch.<dtype>} and
 * {@code torch.Size} is rejected at that opcode, before anything is constructed. Opcodes that would
 * reach outside the pickle (INST, EXT*, PERSID, out-of-band buffers) are rejected too, and every
 * declared length must fit in the bytes that are left, so a hostile pickle cannot make us allocate.
 */
public final class WrapperDecoder {
    /**
     * The modules LMCache's CUDA wrappers have been pickled from, newest first (newest-clients.md §1.3):
     * {@code devices.cuda} since LMCache/LMCache#5282, {@code cuda} from #4805 until then, {@code backends.cuda} in an
     * intermediate tree. The class name decides the kind, whichever of these modules named it.
     */
    static final List<String> CUDA_WRAPPER_MODULES = List.of("lmcache.v1.platform.devices.cuda.ipc_wrapper",
            "lmcache.v1.platform.cuda.ipc_wrapper", "lmcache.v1.platform.backends.cuda.ipc_wrapper");
    static final String CUDA_IPC = "CudaIPCWrapper";
    static final String RAW_CUDA_IPC = "RawCudaIPCWrapper";
    static final String VMM_CUDA_IPC = "VmmCudaIPCWrapper";
    static final String CPU_SHM = "lmcache.v1.platform.cpu.shm.CpuShmTensorWrapper";
    static final String LEGACY_CUDA_IPC = "lmcache.v1.multiprocess.custom_types.CudaIPCWrapper";
    private static final Set<String> CUDA_CLASSES = Set.of(CUDA_IPC, RAW_CUDA_IPC, VMM_CUDA_IPC);
    private static final Set<String> ALLOWED_CLASSES = allowedClasses();
    private static final short BYTEARRAY8 = 150;
    private static final short NEXT_BUFFER = 151;
    private static final short READONLY_BUFFER = 152;

    static {
        for (DType dtype : DType.values()) {
            Unpickler.registerConstructor("torch", dtype.torchName(), new TorchDType(dtype));
        }
        Unpickler.registerConstructor("torch", "Size", new TorchSize());
    }

    private WrapperDecoder() {}

    private static Set<String> allowedClasses() {
        Set<String> allowed = new HashSet<>(Set.of(CPU_SHM, LEGACY_CUDA_IPC));
        for (String module : CUDA_WRAPPER_MODULES) {
            for (String name : CUDA_CLASSES) {
                allowed.add(module + "." + name);
            }
        }
        return Set.copyOf(allowed);
    }

    /** The class name a wrapper's kind is decided by: the bare name for the CUDA wrappers of every module in §1.3. */
    private static String kindOf(String qualified) {
        int dot = qualified.lastIndexOf('.');
        String name = qualified.substring(dot + 1);
        return dot > 0 && CUDA_CLASSES.contains(name) && CUDA_WRAPPER_MODULES.contains(qualified.substring(0, dot)) ? name : qualified;
    }

    /** Decodes one ext-1 payload into a wrapper. */
    public static TensorWrapper decode(byte[] pickle) throws ProtocolException {
        Object root;
        SafeUnpickler unpickler = new SafeUnpickler();
        try {
            root = unpickler.loads(pickle);
        } catch (RejectedGlobal e) {
            throw new ProtocolException(Reason.PICKLE_REJECTED, e.getMessage());
        } catch (IOException | RuntimeException e) {
            throw new ProtocolException(Reason.BAD_PICKLE, "cannot unpickle the tensor wrapper: " + e);
        } finally {
            unpickler.close();
        }
        if (!(root instanceof ClassDict dict)) {
            throw new ProtocolException(Reason.BAD_PICKLE, "pickle is a " + describe(root) + ", not a tensor wrapper object");
        }
        try {
            return toWrapper(dict);
        } catch (ClassCastException | NullPointerException | IllegalArgumentException | ArrayIndexOutOfBoundsException e) {
            throw new ProtocolException(Reason.BAD_PICKLE, dict.getClassName() + " has a missing or mistyped field: " + e.getMessage());
        }
    }

    private static TensorWrapper toWrapper(ClassDict dict) throws ProtocolException {
        String className = dict.getClassName();
        return switch (kindOf(className)) {
            case CPU_SHM -> new TensorWrapper.CpuShm(
                    str(dict, "shm_name"), lng(dict, "nbytes"), dtype(dict), dims(dict, "shape"), strides(dict),
                    lngOr(dict, "storage_offset", 0), strOr(dict, "device_uuid", "cpu"));
            case CUDA_IPC, LEGACY_CUDA_IPC -> new TensorWrapper.CudaIpc(
                    storageHandle(dict.get("handle")), dtype(dict), dims(dict, "shape"), strides(dict),
                    lngOr(dict, "storage_offset", 0), str(dict, "device_uuid"));
            case RAW_CUDA_IPC -> new TensorWrapper.RawCudaIpc(
                    bytes(dict.get("_ipc_handle_reserved"), "_ipc_handle_reserved"), lngOr(dict, "_alloc_offset", 0),
                    lngOr(dict, "_nbytes", 0), dtype(dict), dims(dict, "shape"), strides(dict),
                    lngOr(dict, "storage_offset", 0), str(dict, "device_uuid"));
            case VMM_CUDA_IPC -> vmm(dict);
            default -> throw new ProtocolException(Reason.PICKLE_REJECTED, "unexpected wrapper class " + className);
        };
    }

    /**
     * {@code VmmCudaIPCWrapper}'s state (newest-clients.md §1.3; {@code LMCache/LMCache:lmcache/v1/platform/devices/cuda/
     * ipc_wrapper.py@06a0554d}, {@code __getstate__}): the fabric kind carries its 64-byte {@code CUmemFabricHandle} inline,
     * the POSIX-fd kind nothing (its fd would come out of band, through a transport LMCache has not merged).
     */
    private static TensorWrapper vmm(ClassDict dict) throws ProtocolException {
        String kind = str(dict, "_kind");
        byte[] exportId = bytes(dict.get("_export_id"), "_export_id");
        byte[] blob = dict.get("_fabric_blob") == null ? null : bytes(dict.get("_fabric_blob"), "_fabric_blob");
        TensorWrapper.VmmKind vmmKind = switch (kind) {
            case "fabric" -> TensorWrapper.VmmKind.FABRIC;
            case "posix_fd" -> TensorWrapper.VmmKind.POSIX_FD;
            default -> throw new ProtocolException(Reason.BAD_PICKLE, "VmmCudaIPCWrapper._kind must be fabric or posix_fd, got " + kind);
        };
        if (vmmKind == TensorWrapper.VmmKind.FABRIC && (blob == null || blob.length != 64)) {
            throw new ProtocolException(Reason.BAD_PICKLE, "a fabric VmmCudaIPCWrapper needs a 64-byte _fabric_blob");
        }
        long allocSize = lng(dict, "_alloc_size");
        long allocOffset = lng(dict, "_alloc_offset");
        long nbytes = lng(dict, "_nbytes");
        if (allocSize <= 0 || allocOffset < 0 || nbytes < 0 || allocOffset > allocSize || nbytes > allocSize - allocOffset) {
            throw new ProtocolException(Reason.BAD_PICKLE, "VmmCudaIPCWrapper: offset " + allocOffset + " + " + nbytes
                    + " bytes does not fit in its " + allocSize + "-byte chunk");
        }
        return new TensorWrapper.VmmCudaIpc(exportId, vmmKind, blob == null ? new byte[0] : blob, allocSize, allocOffset, nbytes,
                dtype(dict), dims(dict, "shape"), strides(dict), lngOr(dict, "storage_offset", 0), str(dict, "device_uuid"));
    }

    /** {@code storage._share_cuda_()}: (device, handle, size, offset, ref name, ref offset, event handle, sync). */
    private static TensorWrapper.CudaStorageHandle storageHandle(Object value) throws ProtocolException {
        if (!(value instanceof Object[] tuple) || tuple.length < 4) {
            throw new ProtocolException(Reason.BAD_PICKLE, "CudaIPCWrapper.handle must be the 8-tuple of _share_cuda_(), got " + describe(value));
        }
        byte[] raw = bytes(tuple[1], "handle[1]");
        byte[] memHandle;
        char segmentType;
        if (raw.length == 64) {
            memHandle = raw;
            segmentType = 0;
        } else if (raw.length == 66) {
            memHandle = Arrays.copyOfRange(raw, 2, 66);
            segmentType = (char) (raw[1] & 0xff);
        } else {
            throw new ProtocolException(Reason.BAD_PICKLE, "CUDA IPC memory handle must be 64 bytes (or 66 with torch's prefix), got " + raw.length);
        }
        byte[] eventHandle = tuple.length > 6 && tuple[6] instanceof byte[] b ? b : new byte[0];
        boolean eventSync = tuple.length > 7 && Boolean.TRUE.equals(tuple[7]);
        return new TensorWrapper.CudaStorageHandle(num(tuple[0], "handle[0]").intValue(), memHandle, segmentType,
                num(tuple[2], "handle[2]").longValue(), num(tuple[3], "handle[3]").longValue(), eventHandle, eventSync);
    }

    private static DType dtype(ClassDict dict) throws ProtocolException {
        Object value = dict.get("dtype");
        if (value instanceof TorchDType torch) {
            return torch.dtype;
        }
        if (value instanceof String name && DType.fromTorchName(name) != null) {
            return DType.fromTorchName(name);
        }
        throw new ProtocolException(Reason.BAD_PICKLE, dict.getClassName() + ".dtype is not a supported torch dtype: " + describe(value));
    }

    private static long[] dims(ClassDict dict, String field) throws ProtocolException {
        Object value = dict.get(field);
        long[] out;
        if (value instanceof long[] size) {
            out = size;
        } else if (value instanceof Object[] tuple) {
            out = new long[tuple.length];
            for (int i = 0; i < tuple.length; i++) {
                out[i] = num(tuple[i], field).longValue();
            }
        } else if (value instanceof List<?> list) {
            out = new long[list.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = num(list.get(i), field).longValue();
            }
        } else {
            throw new ProtocolException(Reason.BAD_PICKLE, dict.getClassName() + "." + field + " must be a tuple of ints, got " + describe(value));
        }
        for (long d : out) {
            if (d < 0) {
                throw new ProtocolException(Reason.BAD_PICKLE, dict.getClassName() + "." + field + " has a negative entry");
            }
        }
        return out;
    }

    /** The stride, or the contiguous stride when an older wrapper did not send one. */
    private static long[] strides(ClassDict dict) throws ProtocolException {
        long[] shape = dims(dict, "shape");
        if (dict.get("stride") == null) {
            long[] stride = new long[shape.length];
            long step = 1;
            for (int i = shape.length - 1; i >= 0; i--) {
                stride[i] = step;
                step *= Math.max(1, shape[i]);
            }
            return stride;
        }
        long[] stride = dims(dict, "stride");
        if (stride.length != shape.length) {
            throw new ProtocolException(Reason.BAD_PICKLE, dict.getClassName() + ": shape has " + shape.length + " dims but stride has " + stride.length);
        }
        return stride;
    }

    private static String str(Map<String, Object> dict, String field) {
        Object value = dict.get(field);
        if (value instanceof String s) {
            return s;
        }
        throw new IllegalArgumentException(field + " must be a str, got " + describe(value));
    }

    private static String strOr(Map<String, Object> dict, String field, String fallback) {
        Object value = dict.get(field);
        return value == null ? fallback : str(dict, field);
    }

    private static long lng(Map<String, Object> dict, String field) throws ProtocolException {
        return num(dict.get(field), field).longValue();
    }

    private static long lngOr(Map<String, Object> dict, String field, long fallback) throws ProtocolException {
        Object value = dict.get(field);
        return value == null ? fallback : num(value, field).longValue();
    }

    private static Number num(Object value, String field) throws ProtocolException {
        if (value instanceof BigInteger big) {
            if (big.bitLength() > 63) {
                throw new ProtocolException(Reason.BAD_PICKLE, field + " does not fit in 63 bits");
            }
            return big.longValue();
        }
        if (value instanceof Integer || value instanceof Long || value instanceof Short || value instanceof Byte) {
            return (Number) value;
        }
        throw new ProtocolException(Reason.BAD_PICKLE, field + " must be an int, got " + describe(value));
    }

    private static byte[] bytes(Object value, String field) throws ProtocolException {
        if (value instanceof byte[] b) {
            return b;
        }
        throw new ProtocolException(Reason.BAD_PICKLE, field + " must be bytes, got " + describe(value));
    }

    private static String describe(Object value) {
        return value == null ? "None" : value.getClass().getSimpleName();
    }

    /** Thrown from inside the unpickler when the pickle names a global that is not allowed. */
    private static final class RejectedGlobal extends PickleException {
        private static final long serialVersionUID = 1L;

        RejectedGlobal(String message) {
            super(message);
        }
    }

    /** Pyrolite's unpickler with the allow-list and the length checks in front of its dispatch. */
    private static final class SafeUnpickler extends Unpickler {
        @Override
        protected Object dispatch(short key) throws PickleException, IOException {
            switch (key) {
                case Opcodes.GLOBAL -> {
                    String module = PickleUtils.readline(input);
                    String name = PickleUtils.readline(input);
                    checkAllowed(module, name);
                    stack.add(module);
                    stack.add(name);
                    return super.dispatch(Opcodes.STACK_GLOBAL);
                }
                case Opcodes.STACK_GLOBAL -> {
                    Object name = stack.pop();
                    Object module = stack.pop();
                    if (!(module instanceof String m) || !(name instanceof String n)) {
                        throw new RejectedGlobal("pickle STACK_GLOBAL with non-string operands");
                    }
                    checkAllowed(m, n);
                    stack.add(m);
                    stack.add(n);
                    return super.dispatch(key);
                }
                case Opcodes.INST, Opcodes.EXT1, Opcodes.EXT2, Opcodes.EXT4, Opcodes.PERSID, Opcodes.BINPERSID, NEXT_BUFFER,
                        READONLY_BUFFER -> throw new RejectedGlobal("pickle opcode 0x" + Integer.toHexString(key) + " is not allowed");
                case Opcodes.BINBYTES, Opcodes.BINUNICODE, Opcodes.BINSTRING, Opcodes.LONG4 -> checkDeclaredLength(4);
                case Opcodes.BINBYTES8, Opcodes.BINUNICODE8, BYTEARRAY8 -> checkDeclaredLength(8);
                default -> {
                    // every other opcode reads a bounded number of bytes or nothing
                }
            }
            return super.dispatch(key);
        }

        private void checkAllowed(String module, String name) {
            String qualified = module + "." + name;
            boolean allowed = ALLOWED_CLASSES.contains(qualified)
                    || (module.equals("torch") && (name.equals("Size") || DType.fromTorchName(name) != null));
            if (!allowed) {
                throw new RejectedGlobal("pickle names global '" + qualified + "', which is not on the allow-list");
            }
        }

        /** Peeks the little-endian length that follows the opcode and checks it against the bytes left. */
        private void checkDeclaredLength(int width) throws IOException {
            ByteArrayInputStream in = (ByteArrayInputStream) input;
            in.mark(width);
            byte[] raw = in.readNBytes(width);
            in.reset();
            if (raw.length < width) {
                throw new RejectedGlobal("pickle ends inside a length field");
            }
            long declared = 0;
            for (int i = width - 1; i >= 0; i--) {
                declared = (declared << 8) | (raw[i] & 0xff);
            }
            if (declared < 0 || declared > in.available() - width) {
                throw new RejectedGlobal("pickle declares " + Long.toUnsignedString(declared) + " bytes but only "
                        + (in.available() - width) + " are left");
            }
        }
    }

    /** {@code torch.<dtype>} pickles as a bare global; the unpickler yields this object. */
    private record TorchDType(DType dtype) implements IObjectConstructor {
        @Override
        public Object construct(Object[] args) {
            throw new PickleException("torch." + dtype.torchName() + " is not callable");
        }
    }

    /** {@code torch.Size((d0, d1, ...))} reduces to the tuple of dims. */
    private static final class TorchSize implements IObjectConstructor {
        @Override
        public Object construct(Object[] args) {
            if (args.length != 1 || !(args[0] instanceof Object[] dims)) {
                throw new PickleException("torch.Size expects one tuple");
            }
            long[] out = new long[dims.length];
            for (int i = 0; i < dims.length; i++) {
                out[i] = ((Number) dims[i]).longValue();
            }
            return out;
        }
    }
}
