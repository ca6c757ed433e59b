package io.lmcache.server.l2;

import java.util.function.Consumer;

/**
 * A lookup or load task whose answer is one bit per key, set as keys answer on any thread: {@code onDone} gets a copy of
 * the bits once, after every key answered and all were sent ({@link Countdown}). One class for the adapters' lookups
 * and loads, which answer key by key.
 */
final class KeyBitsTask {
    private final Bitmap bits;
    private final Countdown countdown;

    public KeyBitsTask(int keys, Consumer<Bitmap> onDone) {
        bits = new Bitmap(keys);
        countdown = new Countdown(keys, () -> {
            Bitmap result;
            synchronized (bits) {
                result = bits.copy();
            }
            onDone.accept(result);
        });
    }

    /** Key {@code index} hit (call {@link #oneDone} for it as well). */
    public void set(int index) {
        synchronized (bits) {
            bits.set(index);
        }
    }

    public void oneDone() {
        countdown.oneDone();
    }

    public void submitted() {
        countdown.submitted();
    }
}
