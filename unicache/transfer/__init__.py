"""Transfer engines: the interface and the immediate engine."""

from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.transfer.immediate import ImmediateEngine

__all__ = ["Ack", "CopyOp",
    "ImmediateEngine", "JobKind", "Tier", "TransferEngine", "TransferJob"]
