"""Send an event from the Executions list: ``v`` asks for the event key, then its
payload as JSON (checked in the prompt; empty: null), confirms, and sends it through
``Kestrel.send_event`` (audited): every execution waiting in ``ctx.wait_for_event(key)`` resumes
with the payload, and later waits for the key find it."""

from __future__ import annotations

from typing import Any

from textual import work

from kestrel_core import ActionRefused, InvalidArgument, NotFound, first_line

from .. import formatting as fmt
from .live import ScreenMixin
from .widgets.comment import CommentModal
from .widgets.confirm import ConfirmModal
from .widgets.json_input import JsonAnswer, JsonModal

# The key that sends an event: means nothing else on any screen.
EVENT_KEY = "v"


class SendEventFlow(ScreenMixin):
    """A screen's ``send_event`` action: key, payload, y/n, then the event sent."""

    def action_send_event(self) -> None:
        if self.kapp.read_only:
            self.kapp.refuse_read_only("send_event")
            return

        def with_key(key: str | None) -> None:
            if not key:  # escape, or nothing typed
                return
            prompt = f"Payload of event {key!r}, as JSON:"
            modal = JsonModal(f"Send event {key!r}", prompt, empty_means="null, no payload")
            self.app.push_screen(modal, lambda answer: with_payload(key, answer))

        def with_payload(key: str, answer: JsonAnswer | None) -> None:
            if answer is not None:
                self._confirm_event(key, answer.value)

        prompt = "Event key (what the executions wait for in ctx.wait_for_event):"
        self.app.push_screen(CommentModal("Send an event", prompt, placeholder="order-7:paid"), with_key)

    def _confirm_event(self, key: str, payload: Any) -> None:
        question = (
            f"Send event {key!r} with payload {fmt.short_json(payload, 200)}?\n"
            f"Every execution waiting for {key!r} resumes with this payload, and a later wait for it "
            f"finds it. Recorded as {self.kapp.config.operator!r}."
        )

        def done(yes: bool | None) -> None:
            if yes:
                self.perform_send_event(key, payload)

        self.app.push_screen(ConfirmModal(question, title=f"Send event {key!r}"), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def perform_send_event(self, key: str, payload: Any) -> None:
        try:
            event_id = self.kapp.operator.send_event(key, payload)
        except (ActionRefused, NotFound, InvalidArgument, ValueError) as exc:
            self._to_ui(self.kapp.tell, f"event not sent: {first_line(exc)}", severity="warning")
            return
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, "send_event", exc)
            return
        self._to_ui(self.kapp.tell, f"sent event {key!r} (event {event_id}): the executions waiting for it resume")
        self._to_ui(self.refresh_data, force=True)
