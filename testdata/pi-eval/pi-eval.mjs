#!/usr/bin/env node
// pi-eval: what real pi computes for session files, many files per node
// process (pi-oracle starts node once per question, ~0.3 s). Plain JS, no
// npm: it loads the pi-oracle bundles next door. See README.md.
//
//   node pi-eval.mjs serve                  one JSON request a line on stdin:
//                                           {"id", "file", "pi": "seed"|"0.85.1"|"1.6.0", "mode": "report"|"corpus"}
//                                           one JSON answer a line on stdout:
//                                           {"id", "load", "error"?, "sections": [{"key", "text"|"error"|"nonTerminating"}]}
//   node pi-eval.mjs eval FILE [--pi V] [--mode report|corpus]
//
// "text" is the section's canonical JSON (c14n.mjs). Sections: "context"
// (at the file's leaf, with llmMessages), "at:<id>" and "at:null" (after
// branch(id) / resetLeaf()), "tree", "info"; in corpus mode also
// "migrate" and "list". A section pi never returns from is
// {"nonTerminating": true} after at most --timeout ms (default 10000).

import { createInterface } from "node:readline";
import { Runner } from "./runner.mjs";

function flag(args, name, def) {
	const i = args.indexOf(name);
	return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
}

async function main(argv) {
	const [cmd, ...args] = argv;
	const runner = new Runner({ timeoutMs: Number(flag(args, "--timeout", 10000)), heapMb: Number(flag(args, "--heap", 192)) });
	try {
		if (cmd === "eval") {
			const res = await runner.evaluate(args[0], flag(args, "--pi", "seed"), flag(args, "--mode", "report"));
			process.stdout.write(`${JSON.stringify(res, null, 2)}\n`);
			return 0;
		}
		if (cmd === "serve") {
			const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
			for await (const line of rl) {
				if (!line.trim()) continue;
				const req = JSON.parse(line);
				let res;
				try {
					res = await runner.evaluate(req.file, req.pi ?? "seed", req.mode ?? "report");
				} catch (e) {
					res = { load: "driver-error", error: String(e?.stack ?? e), sections: [] };
				}
				res.id = req.id;
				process.stdout.write(`${JSON.stringify(res)}\n`);
			}
			return 0;
		}
		process.stderr.write("usage: pi-eval.mjs serve | eval FILE [--pi seed|0.85.1|1.6.0] [--mode report|corpus]\n");
		return 2;
	} finally {
		await runner.close();
	}
}

process.exitCode = await main(process.argv.slice(2));
