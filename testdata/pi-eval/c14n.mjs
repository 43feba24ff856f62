// Canonical JSON: what JSON.stringify writes, with every object's keys
// sorted (default sort: UTF-16 code units) and no nesting limit. Two values
// are equal as pi's results are compared exactly when their canonical
// texts are equal; pisyncd's side (session/c14n_test.go) writes the same
// text from its own output. JSON.stringify itself is recursive and throws
// on values nested a few thousand deep, which pi reads without complaint.

const SKIP = Symbol("skip");

function scalar(v, inArray) {
	switch (typeof v) {
		case "string":
			return JSON.stringify(v);
		case "number":
			return Number.isFinite(v) ? String(v === 0 ? 0 : v) : "null";
		case "boolean":
			return v ? "true" : "false";
		case "bigint":
			throw new TypeError("c14n: BigInt");
		case "undefined":
		case "function":
		case "symbol":
			return inArray ? "null" : SKIP;
	}
	return v === null ? "null" : undefined; // undefined: a container
}

/** c14n returns the canonical JSON text of v (undefined for undefined). */
export function c14n(v) {
	if (v !== null && typeof v === "object" && typeof v.toJSON === "function") v = v.toJSON("");
	const top = scalar(v, false);
	if (top === SKIP) return undefined;
	if (top !== undefined) return top;
	const out = [];
	// A frame walks one container: its keys (null for an array), the next
	// index, and whether a member was written yet.
	const stack = [];
	const open = (c) => {
		if (Array.isArray(c)) {
			out.push("[");
			stack.push({ c, keys: null, i: 0, n: 0 });
		} else {
			out.push("{");
			stack.push({ c, keys: Object.keys(c).sort(), i: 0, n: 0 });
		}
	};
	open(v);
	while (stack.length) {
		const f = stack[stack.length - 1];
		const len = f.keys ? f.keys.length : f.c.length;
		if (f.i >= len) {
			out.push(f.keys ? "}" : "]");
			stack.pop();
			continue;
		}
		const k = f.keys ? f.keys[f.i] : f.i;
		f.i++;
		let x = f.c[k];
		if (x !== null && typeof x === "object" && typeof x.toJSON === "function") x = x.toJSON(String(k));
		const s = scalar(x, !f.keys);
		if (s === SKIP) continue;
		if (f.n++ > 0) out.push(",");
		if (f.keys) out.push(JSON.stringify(k), ":");
		if (s !== undefined) out.push(s);
		else open(x);
	}
	return out.join("");
}
