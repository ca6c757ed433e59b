package io.lmcache.server.transfer;

/**
 * What an object group holds (LMCache's {@code group_kinds}, derived on the server, never sent):
 * attention KV, recurrent (Mamba/GDN) state snapshots, or a connector-private aux pool, which a
 * standard RETRIEVE never reads and a LOOKUP never requires.
 */
public enum GroupKind {
    ATTENTION("attention"),
    RECURRENT("recurrent"),
    AUX("aux");

    private final String wireName;

    GroupKind(String wireName) {
        this.wireName = wireName;
    }

    public String wireName() {
        return wireName;
    }
}
