// The tests' build only: a client that goes away while the front waits
// on a tree's object. Cloudflare cancels a fetch handler's pending
// promises (those not given to ctx.waitUntil) when its client
// disconnects. Local workerd does not see an HTTP client's disconnect
// while the handler waits, through wrangler dev or by itself, but it
// cancels a request whose caller dropped it the same way; so the front's
// cut (worker/entry.mjs, the x-revenant-test-cut header) sends the
// client's request to the Worker itself (its SELF service binding) and
// aborts that request once the object holds its answer here.
//
// The front and the Tree objects share one isolate in wrangler dev, and
// so this module's state: the cut arms a hold, the object's answer to the
// next request of that kind waits in hold until the cut has cancelled the
// request, then goes on. Nothing waits here unless a cut armed it, and
// only the tests' build arms (the front's testBuild, and a SELF binding
// only the tests' wrangler.toml has) or holds (the object's testBuild).

let armed = null; // the hold the next answer of its kind waits in

// armHold readies a hold for the object's next answer to a kind of
// request: "create" (a create's 201, the tree committed) or "delete" (a
// root's delete answered 204, its tree gone). It returns the hold:
// reached settles with the tree's id once an answer waits in it, and
// release lets that answer go on.
export function armHold(kind) {
  const h = { kind };
  h.reached = new Promise((resolve) => (h.reach = resolve));
  h.released = new Promise((resolve) => (h.release = resolve));
  armed = h;
  return h;
}

// disarm forgets hold h if no answer took it.
export function disarm(h) {
  if (armed === h) armed = null;
}

// hold keeps tree root's answer to a request of the given kind until the
// armed hold of that kind is released; with none armed it returns at once.
export async function hold(kind, root) {
  const h = armed;
  if (!h || h.kind !== kind) return;
  armed = null;
  console.log(`revenant test: the object holds its answer to a ${kind}: ${root}`);
  h.reach(root);
  await h.released;
  console.log(`revenant test: the object's answer to a ${kind} goes on: ${root}`);
}
