// The page of tg_viz_backward_html in a real browser (headless Chromium,
// driven by playwright-core): it steps through every node of a backward with
// the arrow keys and the buttons and checks that the gradients the page shows
// are the ones tg_backward computed, to the bit.
//
//   node viz_test.mjs MAKE_PAGE              the test (tests/meson.build)
//   node viz_test.mjs MAKE_PAGE --screenshot OUT.png [--page PAGE.html] [--step K]
//                                            a picture of a page at step K
//
// MAKE_PAGE is tests/browser/make_page.c built: it writes page.html and
// expected.json into a fresh directory.  Exit status 0 pass, 1 fail, 77 skip
// (no Chromium on this machine, or a build without Graphviz).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const CHROMIUM = "/usr/bin/chromium";

function skip(reason) {
  console.log("SKIP: " + reason);
  process.exit(77);
}

function fail(message) {
  console.error("FAIL: " + message);
  process.exitCode = 1;
  throw new Error(message);
}

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
if (!args[0]) {
  console.error("usage: node viz_test.mjs MAKE_PAGE [--screenshot OUT.png [--page PAGE] [--step K]]");
  process.exit(2);
}
if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} is not installed (Debian package chromium)`);

let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  console.error("FAIL: playwright-core is missing: run `npm ci` in tests/browser (make test does)");
  process.exit(1);
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "tg-viz-"));
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "tg-chromium-"));
let context;
try {
  let page_path = option("--page");
  if (!page_path) {
    try {
      execFileSync(args[0], [work], { stdio: ["ignore", "pipe", "inherit"] });
    } catch (e) {
      if (e.status === 77) skip(String(e.stdout).trim());
      fail(`${args[0]} failed with status ${e.status}`);
    }
    page_path = path.join(work, "page.html");
  }
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1400, height: 900 },
  });
  // The page must be self-contained: anything but the file itself is refused
  // and counted.
  const outside = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file:") || url.startsWith("data:")) return route.continue();
    outside.push(url);
    return route.abort();
  });
  const page = context.pages()[0] || (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto("file://" + path.resolve(page_path));

  if (args.includes("--screenshot")) {
    const k = Number(option("--step") || "0");
    for (let i = 0; i <= k; i++) await page.keyboard.press("ArrowRight");
    await page.screenshot({ path: option("--screenshot") });
    console.log(`wrote ${option("--screenshot")} at step ${k + 1}`);
  } else {
    await check(page, JSON.parse(fs.readFileSync(path.join(work, "expected.json"), "utf8")));
  }
  if (errors.length) fail("script errors on the page: " + errors.join("; "));
  if (outside.length) fail("the page asked the network for: " + outside.join(", "));
} finally {
  if (context) await context.close();
  fs.rmSync(work, { recursive: true, force: true });
  fs.rmSync(profile, { recursive: true, force: true });
}

function sameBits(what, got, want) {
  if (!Array.isArray(got) || got.length !== want.length)
    fail(`${what}: ${JSON.stringify(got)} has not the ${want.length} values of ${JSON.stringify(want)}`);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) fail(`${what}[${i}]: page ${got[i]}, tg_backward ${want[i]}`);
}

async function stepState(page) {
  return page.evaluate(() => ({
    step: Number(document.body.dataset.step),
    title: document.getElementById("step-title").textContent,
    g: document.getElementById("grad-out") ? JSON.parse(document.getElementById("grad-out").dataset.values) : null,
    current: [...document.querySelectorAll("#graph .node.current")].map((e) => e.id),
    targets: [...document.querySelectorAll("#graph .target")].map((e) => e.id),
    flows: [...document.querySelectorAll("#graph .edge.flow")].map((e) => e.id),
    rows: [...document.querySelectorAll("#flows .flow-row")].map((r) => r.dataset.target),
    leaves: Object.fromEntries([...document.querySelectorAll("#leaves tr.leaf")].map((r) => {
      const c = r.querySelector("td.sum");
      return [r.dataset.name, c ? JSON.parse(c.dataset.values) : null];
    })),
  }));
}

async function check(page, expected) {
  const data = await page.evaluate(() => JSON.parse(document.getElementById("tape-data").textContent));
  const n = data.steps.length;
  if (n !== 9) fail(`expected 9 steps (one per op node), the page has ${n}`);
  let st = await stepState(page);
  if (st.step !== -1 || st.current.length) fail("the page does not open before the first step");
  const named = new Set();
  for (let k = 0; k < n; k++) {
    // the first half with the arrow key, the rest with the button
    if (k < n / 2) await page.keyboard.press("ArrowRight");
    else await page.click("#next");
    st = await stepState(page);
    const s = data.steps[k];
    if (st.step !== k) fail(`step ${k}: the page is at ${st.step}`);
    if (!st.title.startsWith(`Step ${k + 1} of ${n}: #${s.seq} ${s.op}`)) fail(`step ${k}: title '${st.title}'`);
    if (st.current.length !== 1 || st.current[0] !== s.node) fail(`step ${k}: highlighted ${st.current}, not ${s.node}`);
    if (s.name in expected.nodes) {
      sameBits(`step ${k} (${s.name}) incoming gradient`, st.g, expected.nodes[s.name]);
      named.add(s.name);
    }
    for (const inp of s.inputs) {
      if (!st.targets.includes(inp.target)) fail(`step ${k}: input ${inp.target} not highlighted`);
      if (!st.flows.includes(`e_${inp.target}_${s.node}_${inp.index}`))
        fail(`step ${k}: edge from ${inp.target} (input ${inp.index}) not drawn as a flow`);
    }
    // one edge per input, W * W's two included
    if (st.flows.length !== s.inputs.length) fail(`step ${k}: ${st.flows.length} flow edges for ${s.inputs.length} inputs`);
    if (st.rows.length !== s.inputs.length) fail(`step ${k}: ${st.rows.length} rows for ${s.inputs.length} inputs`);
  }
  if (named.size !== Object.keys(expected.nodes).length)
    fail(`steps showed ${[...named]} of ${Object.keys(expected.nodes)}`);
  for (const [name, want] of Object.entries(expected.leaves)) sameBits(`leaf ${name} after the last step`, st.leaves[name], want);
  // past the end it stays; back one step, then Home goes before the start
  await page.keyboard.press("ArrowRight");
  if ((await stepState(page)).step !== n - 1) fail("ArrowRight past the last step moved");
  await page.click("#prev");
  st = await stepState(page);
  if (st.step !== n - 2) fail("the back button did not go back one step");
  if (Object.values(st.leaves).every((v, i) => v && Object.is(v[0], Object.values(expected.leaves)[i][0])))
    fail("one step back, every leaf sum is still the final one (W gets two contributions)");
  await page.keyboard.press("Home");
  if ((await stepState(page)).step !== -1) fail("Home did not go back to the start");
  console.log(`ok: ${n} steps, ${named.size} node gradients and ${Object.keys(expected.leaves).length} leaf gradients as tg_backward`);
}
