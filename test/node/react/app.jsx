// The page react.test.mjs loads in Chromium: React with eve's own hook
// (useEveAgent from npm eve@0.80.1's "eve/react"), talking to the eve serve
// at ?host=... directly (another loopback origin: eve serve reflects it in
// CORS). Bundled by rolldown at test time into a temp dir.
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { openConversationInputs, useEveAgent } from "eve/react";

const host = new URLSearchParams(location.search).get("host");

function App() {
  const agent = useEveAgent({ host });
  const [text, setText] = useState("");
  const waiting = agent.events.some((e) => e.type === "turn.waiting");
  const texts = agent.data.messages.flatMap((m) => m.parts.filter((p) => p.type === "text").map((p) => `${m.role}: ${p.text}`));
  // Every distinct state the page showed, in order, for the test to read
  // back (window.renders): the hook's status, whether a turn.waiting had
  // arrived, and the texts on screen.
  const state = JSON.stringify({ status: agent.status, waited: waiting, texts });
  useEffect(() => {
    const renders = (window.renders ??= []);
    if (renders.at(-1) !== state) renders.push(state);
  }, [state]);
  window.events = agent.events;
  return (
    <main data-status={agent.status} data-session={agent.session?.sessionId ?? ""} data-waited={String(waiting)}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const message = text.trim();
          if (message === "") return;
          setText("");
          void agent.send(message);
        }}
      >
        <input aria-label="Message" value={text} onChange={(e) => setText(e.target.value)} />
        <button type="submit">Send</button>
      </form>
      <ol id="messages">
        {agent.data.messages.map((m) => (
          <li key={m.id} data-role={m.role}>
            {m.parts.map((p, i) =>
              p.type === "text" ? (
                <p key={i} data-part="text">
                  {p.text}
                </p>
              ) : null,
            )}
          </li>
        ))}
      </ol>
      {/* Open input requests from the hook's ledger, answered with
          agent.respond, as eve's frontend guide shows. */}
      {openConversationInputs(agent.data).map(({ request }) => (
        <fieldset key={request.requestId} data-request={request.requestId} data-kind={request.kind} disabled={agent.status === "resuming"}>
          <legend>{request.kind === "tool-approval" ? "Approval required" : request.kind}</legend>
          <p data-part="prompt">{request.prompt}</p>
          {request.action?.toolName ? <code data-part="tool">{request.action.toolName}</code> : null}
          {request.options?.map((option) => (
            <button key={option.id} type="button" data-option={option.id} onClick={() => void agent.respond([{ requestId: request.requestId, optionId: option.id }])}>
              {option.label}
            </button>
          ))}
        </fieldset>
      ))}
      {agent.error ? <p role="alert">{agent.error.message}</p> : null}
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
