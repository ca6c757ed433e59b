package io.lmcache.server.transfer;

/** What planning a transfer gives: a plan, or why the request is refused (a metrics label and a message for the log). */
public sealed interface PlanResult {
    record Planned(TransferPlan plan) implements PlanResult {}

    record Refused(String reason, String message) implements PlanResult {}
}
