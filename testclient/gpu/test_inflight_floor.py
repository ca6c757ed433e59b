"""Unit tests of inflight_floor.py's arithmetic (no GPU, no torch): python3 -m unittest testclient/gpu/test_inflight_floor.py"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import inflight_floor as f  # noqa: E402


class FloorTest(unittest.TestCase):
    def test_floor_is_the_raw_copy_plus_the_median_round_trip(self):
        row = {"request_bytes": 32 << 20, "store_ms_best": 0.8, "store_ms_median": 1.0}
        f.floor_fields(row, "store", 55.0, {"best_us": 40.0, "median_us": 60.0})
        raw_ms = (32 << 20) / 55e9 * 1e3
        self.assertAlmostEqual(row["store_raw_copy_ms"], raw_ms)
        self.assertAlmostEqual(row["store_floor_ms"], raw_ms + 0.06)
        self.assertAlmostEqual(row["store_floor_vs_request"], (raw_ms + 0.06) / 0.8)
        self.assertAlmostEqual(row["store_floor_vs_request_median"], (raw_ms + 0.06) / 1.0)

    def test_no_round_trip_gives_no_floor(self):
        row = f.floor_fields({"request_bytes": 1, "retrieve_ms_best": 1.0, "retrieve_ms_median": 1.0}, "retrieve", 55.0, None)
        self.assertIsNone(row["retrieve_floor_vs_request"])
        self.assertIn("-", f.table([{**row, "chunks": 1, "blocks": "consecutive"}]).splitlines()[1])

    def test_fresh_against_warm_is_the_median_ratio(self):
        warm = {"store_ms_median": 0.9, "retrieve_ms_median": 1.0}
        fresh = {"store_ms_median": 1.8, "store_ms_best": 1.2, "retrieve_ms_median": 1.0, "retrieve_ms_best": 0.9,
                 "store_handler_us": 400.0, "store_floor_ms": 0.9}
        f.fresh_fields(warm, fresh)
        self.assertAlmostEqual(warm["fresh_store_vs_warm"], 0.5)
        self.assertAlmostEqual(warm["fresh_retrieve_vs_warm"], 1.0)
        self.assertAlmostEqual(warm["fresh_store_floor_vs_request_median"], 0.5)
        self.assertEqual(warm["fresh_store_handler_us"], 400.0)
        self.assertNotIn("fresh_retrieve_floor_vs_request_median", warm)

    def test_path_split_lines_the_server_timeline_up_with_the_worker_clock(self):
        splits = [{"sent_ns": 1_000_000, "replied_ns": 1_900_000}, {"sent_ns": 5_000_000, "replied_ns": 5_700_000},
                  {"sent_ns": 9_000_000, "replied_ns": 9_100_000}]  # the third has no server entry in its window
        timeline = [[5_100_000, 5_400_000, 5_450_000], [1_200_000, 1_500_000, 1_600_000], [20_000_000, 20_000_001, 20_000_002]]
        out = f.path_split("store", splits, timeline)
        self.assertEqual(out["store_path_matched"], 2)
        self.assertAlmostEqual(out["store_path_in_us_median"], 150.0)  # 200 and 100 µs
        self.assertAlmostEqual(out["store_path_handler_us_median"], 300.0)
        self.assertAlmostEqual(out["store_path_send_us_median"], 75.0)  # 100 and 50
        self.assertAlmostEqual(out["store_path_out_us_median"], 275.0)  # 300 and 250
        warm = {"store_ms_median": 1.0, "retrieve_ms_median": 1.0, **f.path_split("retrieve", [], [])}
        f.fresh_fields(warm, {"store_ms_median": 1.0, "store_ms_best": 1.0, "retrieve_ms_median": 1.0, "retrieve_ms_best": 1.0,
                              "store_handler_p50_us": None, "retrieve_handler_p50_us": None, **out})
        self.assertEqual(warm["fresh_store_path_matched"], 2)
        self.assertIsNone(warm["retrieve_path_in_us_median"])
        lines = f.path_table([{**warm, "chunks": 1, "blocks": "consecutive"}]).splitlines()
        self.assertEqual(len(lines), 3)
        self.assertIn("150", lines[1])
        self.assertIn("-", lines[2])

    def test_floor_uses_the_ops_own_bytes_where_given(self):
        row = {"request_bytes": 8 << 20, "retrieve_bytes": 2 << 20, "retrieve_ms_best": 1.0, "retrieve_ms_median": 1.0}
        f.floor_fields(row, "retrieve", 50.0, {"best_us": 10.0, "median_us": 20.0})
        self.assertAlmostEqual(row["retrieve_raw_copy_ms"], (2 << 20) / 50e9 * 1e3)

    def test_subscriber_ratios_are_against_the_base_count(self):
        per_count = {0: {"store_ms_best": 1.0, "store_ms_median": 2.0, "retrieve_ms_best": 1.0, "retrieve_ms_median": 1.0,
                         "store_handler_us": 100.0, "retrieve_handler_us": None},
                     8: {"store_ms_best": 1.1, "store_ms_median": 2.2, "retrieve_ms_best": 0.9, "retrieve_ms_median": 1.0,
                         "store_handler_us": 120.0, "retrieve_handler_us": 50.0,
                         "per_subscriber": [{"records": 5, "batches": 3, "lost": 0}, {"records": 6, "batches": 4, "lost": 1}]}}
        row = f.subscriber_fields({"chunks": 4, "blocks": "consecutive"}, per_count, 0)
        ratio = row["subscriber_ratios"]["8"]
        self.assertAlmostEqual(ratio["store_best"], 1.1)
        self.assertAlmostEqual(ratio["store_median"], 1.1)
        self.assertAlmostEqual(ratio["retrieve_best"], 0.9)
        self.assertAlmostEqual(ratio["store_handler"], 1.2)
        self.assertIsNone(ratio["retrieve_handler"])
        self.assertNotIn("0", row["subscriber_ratios"])
        lines = f.subscriber_table([row]).splitlines()
        self.assertIn("base", lines[1])
        self.assertIn("5-6 (3-4, 1)", lines[2])

    def test_frame_sizes_and_summary(self):
        self.assertEqual(f.frame_sizes([b"\x01", b"abc", bytes(67)]), [1, 3, 67])
        self.assertEqual(f.summarize_us([0.003, 0.001, 0.002]), {"best_us": 1000.0, "median_us": 2000.0})


if __name__ == "__main__":
    unittest.main()
