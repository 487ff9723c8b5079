"""The ID layout, read once from a node's GET /v1/layout, and decoding in Python (fast enough for
tens of millions of IDs; the checker cross-checks a sample against the server's own decoder).

An ID is the sum of its fields, each `value << shift`. The time field counts `unit_ms` since
`epoch_unix_ms`. Every field that is neither time nor seq (node, datacenter, worker, clock, ...)
belongs to the *owner key*: IDs with the same owner key come from the same node ID (and clock
generation), which is what the checker groups by.
"""

import json


class Layout:
    def __init__(self, text, time_shift, time_bits, unit_ms, epoch_unix_ms, owner_mask, seq_bits,
                 node_count=None):
        self.text = text
        self.time_shift = time_shift
        self.time_mask = (1 << time_bits) - 1
        self.unit_ms = unit_ms
        self.epoch_unix_ms = epoch_unix_ms
        self.owner_mask = owner_mask
        self.seq_bits = seq_bits
        self.node_count = node_count

    @classmethod
    def from_json(cls, j):
        if isinstance(j, (bytes, str)):
            j = json.loads(j)
        time_shift = time_bits = None
        owner_mask = 0
        seq_bits = 0
        for f in j["fields"]:
            mask = ((1 << f["bits"]) - 1) << f["shift"]
            if f["kind"] == "time":
                time_shift, time_bits = f["shift"], f["bits"]
            elif f["kind"] == "seq":
                seq_bits = f["bits"]
            else:
                owner_mask |= mask
        if time_shift is None:
            raise ValueError(f"layout without a time field: {j}")
        return cls(j["text"], time_shift, time_bits, j["unit_ms"], j["epoch_unix_ms"], owner_mask, seq_bits,
                   j.get("node_count"))

    @classmethod
    def flurry_default(cls):
        """time:41@1ms,node:10,seq:12;epoch=2025-01-01Z (the `flurry` preset)."""
        return cls("time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z", 22, 41, 1, 1735689600000,
                   ((1 << 10) - 1) << 12, 12, 1024)

    def unix_ms(self, id_):
        return self.epoch_unix_ms + ((id_ >> self.time_shift) & self.time_mask) * self.unit_ms

    def owner(self, id_):
        return id_ & self.owner_mask

    def owner_text(self, key):
        """The owner key as a number (the node ID for layouts with one node field)."""
        low = (self.owner_mask & -self.owner_mask).bit_length() - 1 if self.owner_mask else 0
        return key >> low

    def compose(self, unix_ms, owner=0, seq=0):
        """An ID (for tests): time unix_ms, owner key (already shifted), seq."""
        return (((unix_ms - self.epoch_unix_ms) // self.unit_ms) << self.time_shift) | owner | seq
