// Helpers that run inside Deno's Jupyter kernel: what rewritten IPython idioms call.
//
// prelude("javascript") sends this source to the kernel, which evaluates it once at start
// (an indirect eval, so it runs at global scope) under the name tether-prelude.js: a
// traceback can drop these frames. Each helper is a `_tether_*` property of globalThis;
// the prefix keeps them clear of user names, and the rest stays inside this closure.
//
// Shell output is published as Jupyter stream messages as it comes (console.log would add
// newlines; Deno.stdout is not captured by the kernel). stdin is closed: nothing can wait
// on a prompt.
(() => {
  const state = { oldpwd: null, timeStart: 0 };
  const secret = /KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH/i;

  async function publish(name, text) {
    if (text) await Deno.jupyter.broadcast("stream", { name, text });
  }

  // reads a pipe to its end; publishes what it reads until `gate.open` turns false
  async function pump(readable, name, gate) {
    const decoder = new TextDecoder();
    for await (const chunk of readable) {
      if (gate.open) await publish(name, decoder.decode(chunk, { stream: true }));
    }
    if (gate.open) await publish(name, decoder.decode());
  }

  const quietAfterExit = 100; // ms: then a background process (`!server &`) keeps the pipes

  function spawn(shell, command) {
    const options = { args: ["-c", command], stdin: "null", stdout: "piped", stderr: "piped" };
    try {
      return new Deno.Command(shell, options).spawn();
    } catch (error) {
      if (shell === "bash" && error instanceof Deno.errors.NotFound) return spawn("sh", command);
      throw error;
    }
  }

  globalThis._tether_sh = async function (command, options = {}) {
    const child = spawn(options.shell === "sh" ? "sh" : "bash", command);
    const gate = { open: true };
    const pumped = Promise.all([pump(child.stdout, "stdout", gate), pump(child.stderr, "stderr", gate)]);
    const { code } = await child.status;
    const drained = await Promise.race([
      pumped.then(() => true),
      new Promise((resolve) => setTimeout(() => resolve(false), quietAfterExit)),
    ]);
    if (!drained) {
      gate.open = false; // the pumps read on, to the end, publishing nothing
      await publish(
        "stderr",
        "note: a background process still holds the command's output; what it writes " +
          "from now on is discarded (redirect it to keep it: cmd > log.txt 2>&1 &)\n",
      );
    }
    globalThis._exit_code = code;
    if (code) await publish("stderr", `(exit status ${code})\n`);
  };

  function home(path) {
    return path.startsWith("~") ? (Deno.env.get("HOME") ?? "") + path.slice(1) : path;
  }

  globalThis._tether_cd = function (path) {
    let target = path || "~";
    if (path === "-") {
      if (state.oldpwd === null) throw new Error("%cd -: there is no previous directory yet");
      target = state.oldpwd;
    }
    const previous = Deno.cwd();
    Deno.chdir(home(target));
    state.oldpwd = previous;
    console.log(Deno.cwd());
  };

  globalThis._tether_env = function (args) {
    const text = args.trim();
    if (!text) {
      const all = Deno.env.toObject();
      return Object.fromEntries(
        Object.keys(all).sort().map((k) => [k, secret.test(k) ? "<hidden>" : all[k]]),
      );
    }
    const eq = text.indexOf("=");
    const space = text.search(/\s/);
    const cut = eq >= 0 ? eq : space;
    if (cut < 0) {
      const value = Deno.env.get(text);
      if (value === undefined) throw new Error(`%env: environment variable '${text}' is not set`);
      return value;
    }
    const name = text.slice(0, cut).trim();
    const value = text.slice(cut + 1).trim();
    Deno.env.set(name, value);
    console.log(`env: ${name}=${value}`);
  };

  function duration(seconds) {
    for (const [unit, scale] of [["s", 1], ["ms", 1e-3], ["µs", 1e-6]]) {
      if (seconds >= scale) return `${(seconds / scale).toPrecision(3)} ${unit}`;
    }
    return `${(seconds / 1e-9).toPrecision(3)} ns`;
  }

  globalThis._tether_time_start = function () {
    state.timeStart = performance.now();
  };

  globalThis._tether_time_end = function () {
    console.log(`Wall time: ${duration((performance.now() - state.timeStart) / 1000)}`);
  };

  async function loops(body, number) {
    const start = performance.now();
    for (let i = 0; i < number; i++) await body();
    return (performance.now() - start) / 1000;
  }

  globalThis._tether_timeit = async function (body, { number = 0, repeat = 7 } = {}) {
    if (!number) {
      // as Python's timeit.autorange: 1, 2, 5, 10, 20, 50 ... until a run takes 0.2 s
      for (let base = 1; !number; base *= 10) {
        for (const n of [base, 2 * base, 5 * base]) {
          if ((await loops(body, n)) >= 0.2) {
            number = n;
            break;
          }
        }
      }
    }
    const runs = [];
    for (let r = 0; r < repeat; r++) runs.push((await loops(body, number)) / number);
    const mean = runs.reduce((a, b) => a + b, 0) / runs.length;
    const variance = runs.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, runs.length - 1);
    console.log(
      `${duration(mean)} ± ${duration(Math.sqrt(variance))} per loop ` +
        `(mean ± std. dev. of ${repeat} runs, ${number} loops each)`,
    );
  };

  globalThis._tether_writefile = function (path, text, append) {
    const target = home(path);
    let existed = true;
    try {
      Deno.statSync(target);
    } catch {
      existed = false;
    }
    Deno.writeTextFileSync(target, text, { append });
    console.log(`${append ? "Appending to" : existed ? "Overwriting" : "Writing"} ${target}`);
  };
})();
