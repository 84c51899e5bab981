// The session viewer: follows /sessions/{id}/events with EventSource and draws the
// timeline (turns > steps > messages, streaming text, tool calls with output, errors,
// usage). EventSource reconnects by itself and sends Last-Event-ID, so the server
// resumes exactly after the last event drawn; `seen` guards against a replay anyway.
"use strict";

(function () {
  const sessionId = decodeURIComponent(location.pathname.split("/").pop());
  const params = new URLSearchParams(location.search);
  const token = params.get("token");
  const timeline = document.getElementById("timeline");
  const statusEl = document.getElementById("status");
  const eventTypes = JSON.parse(document.getElementById("event-types").textContent);
  const turns = new Map(); // turn_id -> {el, steps: Map(step -> el)}
  const streaming = new Map(); // message key -> element of an assistant message in progress
  const tools = new Map(); // call_id -> tool element
  const usageTotal = { input: 0, output: 0 };
  let lastSeq = -1;
  let count = 0;

  document.getElementById("session-id").textContent = sessionId;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function turnBox(event) {
    if (!event.turn_id) return timeline;
    let turn = turns.get(event.turn_id);
    if (!turn) {
      const box = el("section", "turn");
      box.dataset.turnId = event.turn_id;
      const head = el("div", "head");
      head.append(el("span", "", "Turn " + (turns.size + 1)), el("span", "meta turn-status", "running"));
      box.append(head);
      timeline.append(box);
      turn = { el: box, steps: new Map() };
      turns.set(event.turn_id, turn);
    }
    if (event.step === undefined || event.step === null) return turn.el;
    let step = turn.steps.get(event.step);
    if (!step) {
      step = el("div", "step");
      step.dataset.step = String(event.step);
      step.append(el("div", "head", "Step " + event.step));
      turn.el.append(step);
      turn.steps.set(event.step, step);
    }
    return step;
  }

  function partsText(parts) {
    return (parts || [])
      .map((part) => {
        switch (part.type) {
          case "text":
          case "refusal":
            return part.text;
          case "image":
            return "[image]";
          case "document":
            return "[document " + (part.title || part.filename || "") + "]";
          default:
            return "";
        }
      })
      .filter((text) => text)
      .join("\n");
  }

  function messageKey(event) {
    return (event.message_id || "") + "|" + (event.turn_id || "") + "|" + (event.choice || 0);
  }

  function assistantBox(event) {
    const key = messageKey(event);
    let box = streaming.get(key);
    if (!box) {
      box = el("div", "item assistant streaming");
      box.append(el("span", "label", "assistant"), el("div", "thinking"), el("div", "text"));
      turnBox(event).append(box);
      streaming.set(key, box);
    }
    return box;
  }

  function toolBox(event, callId, name) {
    let box = tools.get(callId);
    if (!box) {
      box = el("div", "item tool");
      box.dataset.callId = callId;
      box.append(el("span", "label", "tool call"), el("span", "name", name || "tool"),
                 el("div", "args meta"), el("pre", "output"));
      turnBox(event).append(box);
      tools.set(callId, box);
    }
    if (name) box.querySelector(".name").textContent = name;
    return box;
  }

  function showArguments(box, args) {
    if (args === undefined || args === null) return;
    box.querySelector(".args").textContent = typeof args === "string" ? args : JSON.stringify(args);
  }

  function handle(event) {
    switch (event.type) {
      case "turn/start":
        turnBox(event);
        break;
      case "turn/end": {
        const turn = turnBox(event).closest(".turn") || turnBox(event);
        const status = event.status || "completed";
        turn.classList.add(status);
        const label = turn.querySelector(".turn-status");
        if (label) label.textContent = status + (event.error ? ": " + event.error : "");
        break;
      }
      case "step/start":
        turnBox(event);
        break;
      case "user/message": {
        const box = el("div", "item user");
        box.append(el("span", "label", "user"), el("div", "text", partsText(event.content)));
        turnBox(event).append(box);
        break;
      }
      case "assistant/chunk": {
        if (event.kind === "tool_arguments" && event.tool_call_id) {
          const box = toolBox(event, event.tool_call_id, event.tool_name);
          box.querySelector(".args").textContent += event.delta || "";
          break;
        }
        const box = assistantBox(event);
        const target = event.kind === "thinking" || event.kind === "summary" ? ".thinking" : ".text";
        if (event.kind !== "signature" && event.kind !== "citation") {
          box.querySelector(target).textContent += event.delta || "";
        }
        break;
      }
      case "assistant/message": {
        const box = assistantBox(event);
        box.classList.remove("streaming");
        streaming.delete(messageKey(event));
        box.querySelector(".text").textContent = partsText(event.content);
        const thinking = (event.content || []).filter((p) => p.type === "thinking");
        if (thinking.length) {
          box.querySelector(".thinking").textContent = thinking.map((p) => p.text || "").join("\n");
        }
        for (const part of event.content || []) {
          if (part.type === "tool_call") showArguments(toolBox(event, part.id, part.name), part.arguments);
        }
        if (event.status === "partial") box.classList.add("error");
        break;
      }
      case "tool/call":
        showArguments(toolBox(event, event.call_id, event.name), event.arguments);
        break;
      case "tool/output":
        toolBox(event, event.call_id).querySelector(".output").textContent += event.delta;
        break;
      case "tool/result": {
        const box = toolBox(event, event.call_id, event.name);
        const text = partsText(event.content);
        const output = box.querySelector(".output");
        if (text && !output.textContent.endsWith(text)) output.textContent += text;
        box.classList.add("done");
        if (event.is_error) box.classList.add("error");
        break;
      }
      case "error": {
        const box = el("div", "item error");
        box.append(el("span", "label", "error" + (event.code ? " · " + event.code : "")),
                   el("div", "text", event.message));
        turnBox(event).append(box);
        break;
      }
      case "usage": {
        const usage = event.usage || {};
        usageTotal.input += usage.input_tokens || 0;
        usageTotal.output += usage.output_tokens || 0;
        document.getElementById("usage-total").textContent =
          "in " + usageTotal.input + " · out " + usageTotal.output;
        turnBox(event).append(el("div", "item usage",
          "usage: in " + (usage.input_tokens || 0) + " (cache read " + (usage.cache_read_tokens || 0) +
          ") · out " + (usage.output_tokens || 0)));
        break;
      }
      default: {
        const box = el("div", "item meta other", event.type);
        box.dataset.type = event.type;
        turnBox(event).append(box);
      }
    }
  }

  function receive(message) {
    // Our `error` event type shares its name with EventSource's own connection-error
    // event, which reaches this listener too but carries no data: skip that one.
    if (typeof message.data !== "string") return;
    const event = JSON.parse(message.data);
    if (event.seq <= lastSeq) return; // never draw an event twice
    lastSeq = event.seq;
    count += 1;
    try {
      handle(event);
    } catch (err) {
      timeline.append(el("div", "item error", "viewer: " + err));
    }
    document.getElementById("event-count").textContent = String(count);
    document.getElementById("last-seq").textContent = String(lastSeq);
  }

  let url = "/sessions/" + encodeURIComponent(sessionId) + "/events";
  if (token) url += "?token=" + encodeURIComponent(token);
  const source = new EventSource(url);
  for (const type of eventTypes) source.addEventListener(type, receive);
  source.onmessage = receive;
  // The server ends a stream it cannot go on with (a corrupt stored event) with this
  // frame; resuming would meet the same error every second: stop and say why.
  source.addEventListener("stream-error", (message) => {
    source.close();
    let text = "the stream stopped";
    try {
      const error = JSON.parse(message.data).error;
      text = error.message + (error.seq != null ? " (seq " + error.seq + ")" : "");
    } catch (err) { /* keep the plain text */ }
    timeline.append(el("div", "item error", "stream error: " + text));
    statusEl.textContent = "stopped";
    statusEl.className = "reconnecting";
  });
  source.onopen = () => { statusEl.textContent = "live"; statusEl.className = "live"; };
  source.onerror = (e) => {
    if (e instanceof MessageEvent) return; // an `error` event of the session, drawn by receive
    statusEl.textContent = source.readyState === EventSource.CLOSED ? "closed" : "reconnecting";
    statusEl.className = "reconnecting";
  };
  window.universalEventViewer = { source, get lastSeq() { return lastSeq; }, get count() { return count; } };
})();
