// A child process that evaluates session files section by section with the
// real pi code (sections.mjs) and posts each section's canonical text as
// soon as it has it. runner.mjs runs it under a heap limit and a deadline:
// when pi never returns from a section (a parentId cycle grows its path
// array until the heap is gone), the runner ends this thread, records the
// section as non-terminating and starts a new one for the rest.

import { c14n } from "./c14n.mjs";
import {
	cleanup,
	contextSection,
	headerVersion,
	infoSection,
	listSection,
	loadPi,
	migrateSection,
	openCopy,
	reportLeaves,
	treeSection,
} from "./sections.mjs";

// plan lists the sections of a file: "context", "at:<id>" / "at:null"
// (the context after branch(id) / resetLeaf()), "tree", "info", and for
// the corpus "migrate" and "list".
function plan(sm, file, mode) {
	const ids = sm.getEntries().map((e) => e.id);
	const keys = ["context"];
	let leaves;
	if (mode === "corpus") {
		// every entry when there are at most 25, else every leaf (MANIFEST.md)
		const entries = sm.getEntries();
		if (entries.length <= 25) leaves = reportLeaves(ids, Infinity);
		else {
			const parents = new Set(entries.map((e) => e.parentId));
			leaves = reportLeaves(ids.filter((id) => !parents.has(id)), Infinity);
		}
	} else {
		leaves = reportLeaves(ids);
	}
	for (const id of leaves) keys.push(`at:${id}`);
	keys.push("at:null", "tree", "info");
	if (mode === "corpus") {
		const v = headerVersion(file);
		if (v !== null && !(v >= 3)) keys.push("migrate");
		keys.push("list");
	}
	return keys;
}

// send resolves once the message is written to the IPC channel. A section
// that never returns blocks this process's event loop for good, so a large
// answer still queued behind it (the pipe takes 64 KB at a time) would die
// with the process and the section before would look as if pi never
// returned from it: each section waits for its answer to be out first.
const send = (msg) =>
	new Promise((resolve, reject) => process.send(msg, (err) => (err ? reject(err) : resolve())));

async function section(pi, sm, file, key) {
	if (key === "context") return contextSection(pi, sm);
	if (key.startsWith("at:")) {
		const id = key.slice(3);
		if (id === "null") sm.resetLeaf();
		else sm.branch(id);
		return contextSection(pi, sm);
	}
	switch (key) {
		case "tree":
			return treeSection(sm);
		case "info":
			return infoSection(sm);
		case "migrate":
			return migrateSection(sm);
		case "list":
			return listSection(pi, file);
	}
	throw new Error(`unknown section ${key}`);
}

process.on("message", async (req) => {
	// req: {file, pi, mode, skip}: sections before index skip are done.
	const pi = await loadPi(req.pi);
	const o = openCopy(pi, req.file);
	try {
		if (o.empty) return await send({ load: "empty" });
		if (o.error) return await send({ load: "error", error: o.error });
		const keys = plan(o.sm, req.file, req.mode);
		await send({ load: "ok", plan: keys });
		const leaf = o.sm.getLeafId();
		for (let i = req.skip; i < keys.length; i++) {
			await send({ start: i });
			let answer;
			try {
				if (keys[i] === "context" || keys[i] === "tree" || keys[i] === "info") {
					// back to the file's leaf (an at: section moved it)
					o.sm.leafId = leaf;
				}
				const v = await section(pi, o.sm, req.file, keys[i]);
				answer = { i, text: c14n(v) ?? "undefined" };
			} catch (e) {
				answer = { i, error: String(e?.message ?? e) };
			}
			await send(answer);
		}
		await send({ done: true });
	} finally {
		cleanup(o);
	}
});
