"""Flower's ServerApp and ClientApps in one process: a ``Grid`` that hands each message to the
destination node's ClientApp and returns its reply.

flwr's own simulation runtime needs Ray, which FedWeb does not install (hundreds of MB, and two
cores here). Everything else is Flower's: the ServerApp's main, the Message-API strategy, the
ClientApps and the Message/ArrayRecord objects they exchange; only the transport is a function call.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

SUPERLINK = 1


class InProcessGrid(Grid):
    def __init__(self, client_app: ClientApp, num_nodes: int, *, fail_nodes: Iterable[int] = ()):
        self.client_app = client_app
        self.nodes = {node: Context(run_id=1, node_id=node, node_config={"partition-id": i, "num-partitions": num_nodes},
                                    state=RecordDict(), run_config={})
                      for i, node in enumerate(range(1001, 1001 + num_nodes))}  # fmt: skip
        self.fail_nodes = set(fail_nodes)  # nodes whose ClientApp raises: replies with an error
        self._run = Run.create_empty(run_id=1)
        # What Flower's runtime sets in a ServerApp process: new messages take their source from it.
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, SUPERLINK, 1
        self._replies: dict[str, Message] = {}

    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content=content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = str(uuid4())
            node = message.metadata.dst_node_id
            if node in self.fail_nodes:
                reply = Message(Error(code=0, reason="node failed"), reply_to=message)
            else:
                reply = self.client_app(message, self.nodes[node])
            self._replies[message.metadata.message_id] = reply
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))
