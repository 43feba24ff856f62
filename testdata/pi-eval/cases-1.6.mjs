// The cases of testdata/conformance-1.6 (gen-conformance-1.6.mjs): writer
// scripts for the real 1.6.0 writer (pi-oracle README, "write") and
// hand-made files for what that writer never produces.

const SYSTEM_FIRST = {
	op: "message",
	message: {
		role: "system",
		content: "You are pi, a coding agent.",
		sections: { identity: "You are pi, a coding agent.", cwd: "Working directory: /home/u/proj", date: "Today is 2026-11-29." },
		toolsAdded: [
			{ name: "read", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } },
			{ name: "bash", description: "Run a command", parameters: { type: "object", properties: { command: { type: "string" } } } },
		],
		timestamp: 1764457696000,
	},
};
const SYSTEM_PATCH = {
	op: "message",
	message: {
		role: "system",
		content: "",
		sections: { date: "Today is 2026-11-30.", cwd: null, skills: "Skills: none." },
		toolsAdded: [{ name: "edit", description: "Edit a file", parameters: { type: "object" } }],
		toolsRemoved: [{ name: "bash" }],
		timestamp: 1764544096000,
	},
};
const USAGE = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15, cost: { input: 0.001, output: 0.002, cacheRead: 0, cacheWrite: 0, total: 0.003 } };

const start = [
	{ op: "model_change", provider: "anthropic", modelId: "claude-sonnet-4-5" },
	{ op: "thinking_level_change", thinkingLevel: "medium" },
];

// ---------------------------------------------------------------------------
// hand-made lines
// ---------------------------------------------------------------------------

const T = (s) => `2026-11-29T23:${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}.000Z`;
const header = (v = 3) => JSON.stringify({ type: "session", version: v, id: "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a6c", timestamp: T(0), cwd: "/home/u/proj" });
let clock = 0;
const e = (o) => JSON.stringify({ ...o, timestamp: o.timestamp ?? T(++clock) });
const user = (id, parentId, content) => e({ type: "message", id, parentId, message: { role: "user", content, timestamp: 1764457696000 + clock * 1000 } });
const asst = (id, parentId, text, extra = {}) =>
	e({
		type: "message",
		id,
		parentId,
		message: { role: "assistant", content: [{ type: "text", text }], api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-4-5", usage: USAGE, stopReason: "stop", timestamp: 1764457696000 + clock * 1000, ...extra },
	});
const sys = (id, parentId, message) => e({ type: "message", id, parentId, message: { role: "system", timestamp: 1764457696000, ...message } });
const edit = (id, parentId, targetId, replacement) => e(replacement === undefined ? { type: "context_edit", id, parentId, targetId } : { type: "context_edit", id, parentId, targetId, replacement });
const comp = (id, parentId, extra) => e({ type: "compaction", id, parentId, summary: `summary ${id}`, tokensBefore: 5000, ...extra });
const lines = (...ls) => {
	clock = 0;
	return `${[header(), ...ls].join("\n")}\n`;
};

export const CASES = [
	// --- the real 1.6.0 writer ---
	{
		name: "writer16-basic",
		covers: "1.6.0 writer: the first write comes with the first user message (header, model/thinking changes, user), one appended line per entry after it; a system message as pi 1.x stores it on the first request (every section and tool)",
		script: [...start, { op: "user", text: "hello", as: "u1" }, SYSTEM_FIRST, { op: "assistant", text: "hi" }, { op: "user", text: "list files" }, { op: "assistant", text: "here" }],
	},
	{
		name: "writer16-system-patches",
		covers: "system messages patch the prompt: sections replaced and removed by name (null), tools added and removed; all of them stay in the context and reach the model (convertToLlm passes role system); the seed rules keep them in messages but drop them from llmMessages",
		script: [...start, { op: "user", text: "hello" }, SYSTEM_FIRST, { op: "assistant", text: "hi" }, SYSTEM_PATCH, { op: "user", text: "next" }, { op: "assistant", text: "ok" }],
	},
	{
		name: "writer16-compaction-system-message",
		covers: "appendCompaction stores the current system prompt (all system messages replayed: sections, tools) as systemMessage; the context starts with it, then the summary; system messages inside the kept range are dropped, those after the compaction stay; seed ignores systemMessage and keeps them",
		script: [
			...start,
			{ op: "user", text: "first", as: "u1" },
			SYSTEM_FIRST,
			{ op: "assistant", text: "one" },
			{ op: "user", text: "second", as: "u2" },
			SYSTEM_PATCH,
			{ op: "assistant", text: "two" },
			{ op: "compaction", summary: "we talked twice", firstKeptEntryId: "@u2", tokensBefore: 12000 },
			{ op: "user", text: "third" },
			{ op: "message", message: { ...SYSTEM_PATCH.message, sections: { date: "Today is 2026-12-01." }, toolsAdded: [], toolsRemoved: [], timestamp: 1764630496000 } },
			{ op: "assistant", text: "three" },
		],
	},
	{
		name: "writer16-retain-none-compaction",
		covers: "appendCompaction without firstKeptEntryId: 1.6.0 writes the compaction's own id (retain-none), so nothing before it is kept; a second retain-none compaction's systemMessage is rebuilt from the first one's systemMessage (the only system message left in the context)",
		script: [
			...start,
			{ op: "user", text: "a" },
			SYSTEM_FIRST,
			{ op: "assistant", text: "b" },
			{ op: "compaction", summary: "first summary", tokensBefore: 9000 },
			{ op: "user", text: "c" },
			{ op: "assistant", text: "d" },
			{ op: "compaction", summary: "second summary", tokensBefore: 9500 },
			{ op: "user", text: "e" },
		],
	},
	{
		name: "writer16-context-edit-retry",
		covers: "what auto-retry and overflow recovery write: an assistant attempt that failed (stopReason error) is dropped by context_edit replacement null, the retry follows; a too-long toolResult is replaced by a string (stored as one text block); an edited user message; the latest edit of a target wins; seed ignores every edit",
		script: [
			...start,
			{ op: "user", text: "read the log", as: "u1" },
			SYSTEM_FIRST,
			{ op: "assistant", text: "", stopReason: "error", as: "bad" },
			{ op: "context_edit", target: "@bad", replacement: null },
			{ op: "assistant", toolCalls: [{ id: "c1", name: "read", arguments: { path: "big.log" } }] },
			{ op: "toolResult", toolCallId: "c1", toolName: "read", text: "x".repeat(300), as: "tr" },
			{ op: "context_edit", target: "@tr", replacement: { content: "[output dropped: context overflow]" } },
			{ op: "context_edit", target: "@u1", replacement: { content: "read the log (edited)" } },
			{ op: "context_edit", target: "@u1", replacement: { content: [{ type: "text", text: "read the log (edited twice)" }] } },
			{ op: "assistant", text: "the log is long" },
		],
	},
	{
		name: "writer16-context-edit-branches",
		covers: "context_edit is branch-relative: edits on one branch do not apply on a sibling branch (contextAt the other leaf); an edit of a custom_message; editing an entry before a later compaction: the edit is inside the kept range and applies, an edit entry before the kept range does not",
		script: [
			...start,
			{ op: "user", text: "q1", as: "u1" },
			{ op: "assistant", text: "a1", as: "a1" },
			{ op: "custom_message", customType: "note", content: "extension note", display: true, as: "cm" },
			{ op: "context_edit", target: "@cm", replacement: { content: "note (edited)" } },
			{ op: "user", text: "q2", as: "u2" },
			{ op: "context_edit", target: "@a1", replacement: { content: "a1 (edited, before the kept range)" } },
			{ op: "user", text: "q3", as: "u3" },
			{ op: "context_edit", target: "@u3", replacement: { content: "q3 (edited, inside the kept range)" } },
			{ op: "assistant", text: "a3" },
			{ op: "compaction", summary: "s", firstKeptEntryId: "@u3", tokensBefore: 100 },
			{ op: "user", text: "q4" },
			{ op: "branch", to: "@u2" },
			{ op: "assistant", text: "a2 on the other branch" },
		],
	},
	{
		name: "writer16-usage-entries",
		covers: "usage entries (cost outside any message: cache warming, a side request) are tree entries, never in the context, and can be the leaf",
		script: [
			...start,
			{ op: "user", text: "hello" },
			{ op: "usage", kind: "cache_warm", provider: "anthropic", model: "claude-sonnet-4-5", usage: USAGE },
			{ op: "assistant", text: "hi" },
			{ op: "usage", kind: "title", provider: "openai", model: "gpt-5-mini", usage: USAGE, note: "session title" },
		],
	},
	{
		name: "writer16-deferred",
		covers: "an assistant message with stopReason deferred and its deferred handle is an ordinary assistant message: in the context, sets the model; the later result follows",
		script: [
			...start,
			{ op: "user", text: "run the long job" },
			{
				op: "message",
				message: {
					role: "assistant",
					content: [{ type: "toolCall", id: "job1", name: "bash", arguments: { command: "make all" } }],
					api: "openai-responses",
					provider: "openai",
					model: "gpt-5",
					usage: USAGE,
					stopReason: "deferred",
					deferred: { id: "resp_123", kind: "background" },
					timestamp: 1764457700000,
				},
			},
			{ op: "toolResult", toolCallId: "job1", toolName: "bash", text: "done" },
			{ op: "assistant", text: "the job finished" },
		],
	},
	{
		name: "writer16-nested-compaction",
		covers: "the latest compaction keeps a range that holds an older compaction: 1.6.0 emits nothing for the older one (only the first window entry yields a summary), seed emits its summary again",
		script: [
			...start,
			{ op: "user", text: "q1", as: "u1" },
			{ op: "assistant", text: "a1" },
			{ op: "compaction", summary: "older", firstKeptEntryId: "@u1", tokensBefore: 100 },
			{ op: "user", text: "q2" },
			{ op: "assistant", text: "a2" },
			{ op: "compaction", summary: "newer", firstKeptEntryId: "@u1", tokensBefore: 200 },
			{ op: "user", text: "q3" },
		],
	},
	{
		name: "writer16-branched-session",
		covers: "createBranchedSession on 1.6.0: the new file holds the path, a retain-none compaction keeps its own id as firstKeptEntryId",
		script: [...start, { op: "user", text: "q1" }, SYSTEM_FIRST, { op: "assistant", text: "a1" }, { op: "compaction", summary: "s", tokensBefore: 1, as: "c" }, { op: "user", text: "q2", as: "u2" }, { op: "assistant", text: "a2" }, { op: "create_branched_session", leaf: "@u2" }, { op: "assistant", text: "a3" }],
	},

	// --- hand-made ---
	{
		name: "context-edit-replacement-shapes",
		covers: "replacement shapes: a string, a number, an array, {} (content undefined: the key is dropped), {content: null} (content null), a string for assistant/toolResult (one text block) vs for user (kept a string), an array for assistant",
		jsonl: lines(
			user("h0000001", null, "u1"),
			asst("h0000002", "h0000001", "a1"),
			user("h0000003", "h0000002", "u2"),
			asst("h0000004", "h0000003", "a2"),
			user("h0000005", "h0000004", "u3"),
			edit("h0000006", "h0000005", "h0000001", "just a string"),
			edit("h0000007", "h0000006", "h0000002", 42),
			edit("h0000008", "h0000007", "h0000003", ["an", "array"]),
			edit("h0000009", "h0000008", "h0000004", {}),
			edit("h000000a", "h0000009", "h0000005", { content: null }),
			user("h000000b", "h000000a", "u4"),
			asst("h000000c", "h000000b", "a4"),
			edit("h000000d", "h000000c", "h000000b", { content: "u4 edited" }),
			edit("h000000e", "h000000d", "h000000c", { content: [{ type: "text", text: "a4 edited" }, { type: "image", data: "AAAA", mimeType: "image/png" }] }),
		),
	},
	{
		name: "context-edit-targets",
		covers: "edit targets: a system message and a branch_summary (not editable: unchanged), a branch_summary with replacement null (dropped), the compaction itself with replacement null (its systemMessage and summary dropped), a numeric targetId matching a numeric id, an object targetId (matches nothing), an unknown target, an edit without targetId",
		jsonl: lines(
			sys("k0000001", null, { content: "prompt" }),
			user("k0000002", "k0000001", "q"),
			e({ type: "branch_summary", id: "k0000003", parentId: "k0000002", fromId: "zzz", summary: "tried something" }),
			e({ type: "branch_summary", id: "k0000004", parentId: "k0000003", fromId: "zzz", summary: "tried more" }),
			e({ type: "message", id: 7, parentId: "k0000004", message: { role: "user", content: "numeric id" } }),
			e({ type: "message", id: "k0000006", parentId: 7, message: { role: "user", content: "child of a numeric id" } }),
			edit("k0000007", "k0000006", "k0000001", { content: "system edited?" }),
			edit("k0000008", "k0000007", "k0000003", { content: "summary edited?" }),
			edit("k0000009", "k0000008", "k0000004", null),
			edit("k000000a", "k0000009", 7, { content: "numeric target edited" }),
			edit("k000000b", "k000000a", { id: "k0000006" }, null),
			edit("k000000c", "k000000b", "nope", null),
			e({ type: "context_edit", id: "k000000d", parentId: "k000000c", replacement: null }),
			user("k000000e", "k000000d", "end"),
			comp("k000000f", "k000000e", { firstKeptEntryId: "k0000006", systemMessage: { role: "system", content: "sys at compaction", timestamp: 5 } }),
			user("k0000010", "k000000f", "after"),
			edit("k0000011", "k0000010", "k000000f", null),
		),
	},
	{
		name: "context-edit-without-replacement",
		covers: "a context_edit without replacement: pi 1.6 throws (TypeError reading replacement.content) when its target yields an editable message, and not when it yields none (a compaction summary); contextAt shows both",
		jsonl: lines(
			user("m0000001", null, "q"),
			comp("m0000002", "m0000001", {}),
			edit("m0000003", "m0000002", "m0000002"),
			user("m0000004", "m0000003", "q2"),
			edit("m0000005", "m0000004", "m0000004"),
		),
	},
	{
		name: "system-message-shapes",
		covers: "system messages with content null, absent, an array and a string; outside a kept range all stay (null/absent become \"\"); in a kept range all are dropped; a compaction systemMessage that is a string, a number, an array or {} (truthy: emitted as is; convertToLlm drops what has no role), false and null (no message); an older compaction with systemMessage inside the kept range yields nothing",
		jsonl: lines(
			sys("s0000001", null, { content: null }),
			sys("s0000002", "s0000001", {}),
			e({ type: "message", id: "s0000003", parentId: "s0000002", message: { role: "system", content: [{ type: "text", text: "array prompt" }], sections: { a: "x" } } }),
			user("s0000004", "s0000003", "q1"),
			comp("s0000005", "s0000004", { firstKeptEntryId: "s0000001", systemMessage: "a string" }),
			sys("s0000006", "s0000005", { content: "after the compaction" }),
			user("s0000007", "s0000006", "q2"),
			comp("s0000008", "s0000007", { firstKeptEntryId: "s0000006", systemMessage: 5 }),
			user("s0000009", "s0000008", "q3"),
			comp("s000000a", "s0000009", { firstKeptEntryId: "s0000009", systemMessage: [1, 2] }),
			comp("s000000b", "s000000a", { firstKeptEntryId: "s000000b", systemMessage: {} }),
			comp("s000000c", "s000000b", { firstKeptEntryId: "s000000c", systemMessage: false }),
			comp("s000000d", "s000000c", { firstKeptEntryId: "s000000d", systemMessage: null }),
			user("s000000e", "s000000d", "q4"),
		),
	},
	{
		name: "compaction-system-message-editable",
		covers: "a compaction systemMessage with role user is editable: a context_edit of the compaction replaces its content (the summary stays), and one without replacement makes pi throw",
		jsonl: lines(
			user("p0000001", null, "q"),
			comp("p0000002", "p0000001", { firstKeptEntryId: "p0000001", systemMessage: { role: "user", content: "odd", timestamp: 1 } }),
			edit("p0000003", "p0000002", "p0000002", { content: "odd, edited" }),
			user("p0000004", "p0000003", "q2"),
			edit("p0000005", "p0000004", "p0000002"),
		),
	},
	{
		name: "retained-tail-on-1x",
		covers: "a compaction with retainedTail and a retain-none firstKeptEntryId (its own id) plus a system message: seed uses the tail as a checkpoint, 1.6.0 ignores it; auto follows 1.6.0 (the file holds a system message)",
		jsonl: lines(
			sys("r0000001", null, { content: "prompt" }),
			user("r0000002", "r0000001", "q1"),
			asst("r0000003", "r0000002", "a1"),
			comp("r0000004", "r0000003", { firstKeptEntryId: "r0000004", retainedTail: [{ role: "user", content: "tail", timestamp: 3 }] }),
			user("r0000005", "r0000004", "q2"),
		),
	},
	{
		name: "usage-and-deferred-odd",
		covers: "usage entries with odd fields (no kind, usage a string) and as the leaf; an assistant with stopReason deferred and no provider/model (model {}); a usage entry is the only 1.x line of the file",
		jsonl: lines(
			user("d0000001", null, "q"),
			e({ type: "message", id: "d0000002", parentId: "d0000001", message: { role: "assistant", content: [], stopReason: "deferred", deferred: { id: "x" }, timestamp: 2 } }),
			e({ type: "usage", id: "d0000003", parentId: "d0000002", usage: "lots" }),
			e({ type: "usage", id: "d0000004", parentId: "d0000003", kind: "cache_warm", provider: "anthropic", model: "m", usage: USAGE }),
		),
	},
	{
		name: "context-edit-compaction-window",
		covers: "edits and the compaction window: an edit entry inside the kept range applies to a target inside it; an edit entry after the compaction applies to a kept target and to the compaction's summary message's entry (no effect on the summary); an edit whose target lies before the kept range does nothing",
		jsonl: lines(
			user("w0000001", null, "before the range"),
			user("w0000002", "w0000001", "kept 1"),
			edit("w0000003", "w0000002", "w0000002", { content: "kept 1, edited inside the range" }),
			asst("w0000004", "w0000003", "kept 2"),
			comp("w0000005", "w0000004", { firstKeptEntryId: "w0000002" }),
			edit("w0000006", "w0000005", "w0000004", { content: "kept 2, edited after the compaction" }),
			edit("w0000007", "w0000006", "w0000001", null),
			edit("w0000008", "w0000007", "w0000005", { content: "summary?" }),
			user("w0000009", "w0000008", "after"),
		),
	},
];
