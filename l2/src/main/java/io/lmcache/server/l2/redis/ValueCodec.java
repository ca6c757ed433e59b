package io.lmcache.server.l2.redis;

import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Keys as UTF-8 strings, values as {@link LentBuffer}s written straight into Netty's send buffer:
 * no byte[] and no temporary buffer on the way out (the exact size lets Lettuce write the length
 * first). Values are never decoded through the codec: a GET reads into its buffer through
 * {@link LoadOutput}.
 */
final class ValueCodec implements RedisCodec<String, LentBuffer>, ToByteBufEncoder<String, LentBuffer> {
    static final ValueCodec INSTANCE = new ValueCodec();

    private ValueCodec() {}

    @Override
    public String decodeKey(ByteBuffer bytes) {
        return StandardCharsets.UTF_8.decode(bytes).toString();
    }

    @Override
    public LentBuffer decodeValue(ByteBuffer bytes) {
        return null;
    }

    @Override
    public ByteBuffer encodeKey(String key) {
        return StandardCharsets.UTF_8.encode(key);
    }

    @Override
    public ByteBuffer encodeValue(LentBuffer value) {
        throw new UnsupportedOperationException("values are written through encodeValue(value, target)");
    }

    @Override
    public void encodeKey(String key, ByteBuf target) {
        target.writeCharSequence(key, StandardCharsets.UTF_8);
    }

    @Override
    public void encodeValue(LentBuffer value, ByteBuf target) {
        value.writeTo(target);
    }

    @Override
    public int estimateSize(Object keyOrValue) {
        return switch (keyOrValue) {
            case LentBuffer value -> Math.toIntExact(value.size());
            case String key -> ByteBufUtil.utf8Bytes(key);
            default -> throw new IllegalArgumentException("not a key or value: " + keyOrValue.getClass());
        };
    }

    @Override
    public boolean isEstimateExact() {
        return true;
    }
}
