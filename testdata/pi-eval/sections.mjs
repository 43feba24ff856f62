// What real pi computes for a session file, section by section, with the
// session code of a pi-oracle bundle loaded in this process. The sections
// mirror pi-oracle's commands (context, tree, info, migrate, list), so the
// results have the layout of the conformance corpus (testdata/conformance/
// MANIFEST.md). Runs inside worker.mjs: a section that never returns (pi
// has no parentId-cycle guard) is ended there, not here.

import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, utimesSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const ORACLE = join(HERE, "..", "pi-oracle");

// ---------------------------------------------------------------------------
// Entry ids of version-1 files.
//
// pi gives every entry of a v1 file a fresh random id (crypto.randomUUID()
// sliced to 8 hex digits) on each load. pisyncd derives them instead:
// hex(sha256(sessionId + "\0" + k))[:8] for the k-th entry (session/tree.go
// v1ID), so that every replay agrees. Feeding pi those same "random" ids
// makes its results comparable without renaming anything.
// ---------------------------------------------------------------------------

const require = createRequire(import.meta.url);
const nodeCrypto = require("node:crypto");
const realRandomUUID = nodeCrypto.randomUUID.bind(nodeCrypto);
let v1Session = null;
let v1Counter = 0;
nodeCrypto.randomUUID = () => {
	if (v1Session === null) return realRandomUUID();
	const h = createHash("sha256")
		.update(Buffer.concat([Buffer.from(v1Session, "utf8"), Buffer.from([0]), Buffer.from(String(v1Counter++))]))
		.digest("hex");
	return `${h.slice(0, 8)}-0000-4000-8000-000000000000`;
};
syncBuiltinESMExports();

const bundles = new Map();

/** The pi session code of a bundle: "seed", "0.85.1" or "1.6.0". */
export async function loadPi(version) {
	if (!bundles.has(version)) {
		bundles.set(version, await import(pathToFileURL(join(ORACLE, `pi-oracle-${version}.mjs`)).href));
	}
	return bundles.get(version);
}

/**
 * Open a private copy of FILE with the real SessionManager (open() may
 * rewrite it: migration, an empty file, the missing final newline).
 * Returns {sm, dir, copy} or {error}; {empty: true} for a zero-byte file,
 * which pi turns into a new session with a random id and the current time.
 */
export function openCopy(pi, file) {
	const raw = readFileSync(file);
	const dir = mkdtempSync(join(tmpdir(), "pi-eval-"));
	const copy = join(dir, "session.jsonl");
	copyFileSync(file, copy);
	if (raw.length === 0) return { empty: true, dir, copy };
	// The header id seeds the v1 ids; pi's own reader finds the header.
	const entries = pi.loadEntriesFromFile(copyProbe(copy, dir));
	v1Session = entries.length && typeof entries[0].id === "string" ? entries[0].id : "";
	v1Counter = 0;
	try {
		return { sm: pi.SessionManager.open(copy, dir), dir, copy };
	} catch (error) {
		return { error: String(error?.message ?? error), dir, copy };
	} finally {
		v1Session = null;
	}
}

function copyProbe(copy, dir) {
	const probe = join(dir, "probe.jsonl");
	copyFileSync(copy, probe);
	return probe;
}

export function cleanup(o) {
	if (o?.dir) rmSync(o.dir, { recursive: true, force: true });
}

/** The context at the current leaf, as `pi-oracle context FILE --llm` prints it. */
export function contextSection(pi, sm, llm = true) {
	const ctx = sm.buildSessionContext();
	const out = {
		leafId: sm.getLeafId(),
		contextEntryIds: sm.buildContextEntries().map((e) => e.id),
		messages: ctx.messages,
		thinkingLevel: ctx.thinkingLevel,
		model: ctx.model,
	};
	if (out.leafId === undefined) out.leafIdUndefined = true;
	if (llm) out.llmMessages = pi.convertToLlm(ctx.messages);
	return out;
}

function flattenTree(roots) {
	const children = {};
	const preorder = [];
	const stack = [...roots].reverse();
	while (stack.length) {
		const node = stack.pop();
		preorder.push(node.entry.id);
		if (node.children.length) children[node.entry.id] = node.children.map((c) => c.entry.id);
		for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
	}
	return { children, preorder };
}

/** pi-oracle tree. */
export function treeSection(sm) {
	const entries = sm.getEntries();
	const roots = sm.getTree();
	const { children, preorder } = flattenTree(roots);
	const insertionChildren = {};
	const labels = {};
	const seen = new Set();
	for (const e of entries) {
		if (seen.has(e.id)) continue;
		seen.add(e.id);
		const kids = sm.getChildren(e.id).map((c) => c.id);
		if (kids.length) insertionChildren[e.id] = kids;
		const label = sm.getLabel(e.id);
		if (label !== undefined) labels[e.id] = label;
	}
	return {
		leafId: sm.getLeafId(),
		roots: roots.map((r) => r.entry.id),
		children,
		insertionChildren,
		preorder,
		labels,
		entries: entries.map((e) => ({ id: e.id, parentId: e.parentId, type: e.type })),
	};
}

/** pi-oracle info. */
export function infoSection(sm) {
	const entries = sm.getEntries();
	const labels = {};
	for (const e of entries) {
		const l = sm.getLabel(e.id);
		if (l !== undefined) labels[e.id] = l;
	}
	return {
		sessionId: sm.getSessionId(),
		header: sm.getHeader(),
		sessionName: sm.getSessionName() ?? null,
		leafId: sm.getLeafId(),
		entryCount: entries.length,
		labels,
	};
}

/** pi-oracle migrate: header and entries as pi holds them after load. */
export function migrateSection(sm) {
	return { header: sm.getHeader(), entries: sm.getEntries() };
}

/** The header version as pi reads it (header.version ?? 1), null without a header. */
export function headerVersion(file) {
	for (const line of readFileSync(file, "utf8").split("\n")) {
		if (!line.trim()) continue;
		try {
			const e = JSON.parse(line);
			if (!e) continue;
			return e.type === "session" ? (e.version ?? 1) : null;
		} catch {
			// pi skips malformed lines
		}
	}
	return null;
}

/** pi-oracle list for the one file (mtime pinned to 2000-01-01), null when list skips it. */
export async function listSection(pi, file) {
	const dir = mkdtempSync(join(tmpdir(), "pi-eval-list-"));
	try {
		const name = basename(file).endsWith(".jsonl") ? basename(file) : `${basename(file)}.jsonl`;
		const copy = join(dir, name);
		copyFileSync(file, copy);
		const t = new Date("2000-01-01T00:00:00.000Z");
		utimesSync(copy, t, t);
		const infos = await pi.SessionManager.listAll(dir);
		const s = infos[0];
		if (!s) return null;
		return {
			file: name,
			id: s.id,
			cwd: s.cwd,
			name: s.name ?? null,
			parentSessionPath: s.parentSessionPath ?? null,
			created: isNaN(s.created.getTime()) ? null : s.created.toISOString(),
			modified: isNaN(s.modified.getTime()) ? null : s.modified.toISOString(),
			messageCount: s.messageCount,
			firstMessage: s.firstMessage,
			allMessagesText: s.allMessagesText,
		};
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}

/**
 * The leaves a report builds contexts at: for files of up to `all`
 * distinct string ids every one of them, else the first and last `ends`
 * of them, in file order (pisyncd's side picks the same ones).
 */
export function reportLeaves(ids, all = 25, ends = 4) {
	const seen = new Set();
	const distinct = [];
	for (const id of ids) {
		if (typeof id !== "string" || seen.has(id)) continue;
		seen.add(id);
		distinct.push(id);
	}
	if (distinct.length <= all) return distinct;
	return [...distinct.slice(0, ends), ...distinct.slice(-ends)];
}
