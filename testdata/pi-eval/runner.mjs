// Runs worker.mjs in a child process under a heap limit and a per-section
// deadline, so that a section pi never finishes costs a bounded time and
// memory: it is reported as {"nonTerminating": true} and the next section
// goes on in a fresh process.

import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const WORKER = fileURLToPath(new URL("./worker.mjs", import.meta.url));

export class Runner {
	/**
	 * @param {{timeoutMs?: number, heapMb?: number}} opts
	 * timeoutMs bounds one section, heapMb the worker's heap (a parentId
	 * cycle exhausts it within about a second).
	 */
	constructor({ timeoutMs = 10000, heapMb = 192 } = {}) {
		this.timeoutMs = timeoutMs;
		this.heapMb = heapMb;
		this.worker = null;
	}

	spawn() {
		// TZ=UTC: a date-time without offset is local time to pi, and
		// pisyncd reads it as UTC.
		this.worker = fork(WORKER, [], {
			execArgv: [`--max-old-space-size=${this.heapMb}`],
			env: { ...process.env, TZ: "UTC" },
			stdio: ["ignore", "ignore", "ignore", "ipc"],
			// structured clone, length-prefixed: JSON over the IPC pipe
			// grows quadratically with a message of megabytes (a huge id
			// or value) and runs a worker out of heap.
			serialization: "advanced",
		});
	}

	async close() {
		const w = this.worker;
		this.worker = null;
		if (!w || w.exitCode !== null || w.signalCode !== null) return;
		const exited = new Promise((resolve) => w.once("exit", resolve));
		w.kill("SIGKILL");
		await exited;
	}

	/**
	 * evaluate runs the sections of FILE under rule set PI ("seed",
	 * "0.85.1", "1.6.0"). mode "report" (the differential test) or
	 * "corpus" picks the sections (worker.mjs). Returns
	 * {load: "ok"|"error"|"empty", error?, sections: [{key, text?, error?, nonTerminating?}]}.
	 */
	async evaluate(file, pi, mode = "report") {
		const result = { load: "ok", sections: [] };
		let keys = null;
		let skip = 0;
		for (;;) {
			if (!this.worker) this.spawn();
			const outcome = await this.run({ file, pi, mode, skip }, (msg) => {
				if (msg.load && msg.load !== "ok") {
					result.load = msg.load;
					if (msg.error) result.error = msg.error;
				} else if (msg.plan) {
					keys = msg.plan;
				} else if (msg.i !== undefined) {
					const s = { key: keys[msg.i] };
					if (msg.error !== undefined) s.error = msg.error;
					else s.text = msg.text;
					result.sections[msg.i] = s;
					skip = msg.i + 1;
				}
			});
			if (outcome.done) return result;
			// The worker died or overran the deadline: in a section if the
			// plan is known, else while opening the file.
			await this.close();
			if (keys === null) {
				result.load = "nonTerminating";
				result.error = outcome.why;
				return result;
			}
			result.sections[skip] = { key: keys[skip], nonTerminating: true, why: outcome.why };
			skip++;
			if (skip >= keys.length) return result;
		}
	}

	run(req, onMessage) {
		return new Promise((resolve) => {
			const w = this.worker;
			let timer = null;
			const arm = () => {
				clearTimeout(timer);
				timer = setTimeout(() => finish({ done: false, why: `no answer within ${this.timeoutMs} ms` }), this.timeoutMs);
			};
			const finish = (outcome) => {
				clearTimeout(timer);
				w.off("message", onMsg);
				w.off("error", onErr);
				w.off("exit", onExit);
				resolve(outcome);
			};
			const onMsg = (msg) => {
				arm();
				if (msg.done || (msg.load && msg.load !== "ok")) return finish({ done: true, msg: onMessage(msg) });
				onMessage(msg);
			};
			const onErr = (e) => finish({ done: false, why: String(e?.code ?? e?.message ?? e) });
			const onExit = (code) => finish({ done: false, why: `worker exited (${code})` });
			w.on("message", onMsg);
			w.on("error", onErr);
			w.on("exit", onExit);
			arm();
			w.send(req);
		});
	}
}
