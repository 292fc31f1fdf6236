// A tiny deployment assistant in Node: answers one user message per call with one call of an OpenAI-compatible
// chat-completions endpoint ($OPENAI_BASE_URL, key $OPENAI_API_KEY), through the global fetch (Node >= 18).
//
// The Node example of the integrate-reflexio skill: `inspect_agent.py` reports the model call here, and SKILL.md
// ("TypeScript / Node agents") wires Reflexio into a copy with scripts/reflexio.mjs; tests/test_integration_skill.py
// does exactly that and runs the wired agent against a live service with a stub model.

export const SYSTEM_PROMPT = "You are a careful deployment assistant for the platform team. Answer briefly.";
const BASE_URL = process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1";
const MODEL = process.env.OPENAI_MODEL ?? "gpt-4o-mini";

export async function answer(userId, message) {
  const messages = [
    { role: "system", content: SYSTEM_PROMPT },
    { role: "user", content: message },
  ];
  const response = await fetch(`${BASE_URL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: MODEL, messages }),
  });
  if (!response.ok) throw new Error(`model call failed: HTTP ${response.status}`);
  const completion = await response.json();
  return completion.choices[0].message.content.trim();
}
