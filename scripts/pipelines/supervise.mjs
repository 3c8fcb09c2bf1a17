#!/usr/bin/env node
// Runs one deployment pipeline on behalf of the server, so that a run can never outlive the server that started it.
//
//   node supervise.mjs --grace-ms <ms> -- <command> [args...]
//
// The server starts this script as the leader of a new process group, with a pipe on its stdin, and this script runs
// the pipeline in that same group: one group holds the whole run, so one kill(-pgid) reaches every process of it. The
// pipeline's stdout and stderr are the server's pipes themselves (inherited), so its output reaches the server
// unchanged; this script exits with the pipeline's exit code, or dies of the signal that killed it.
//
// Stopping a run is this script's job, so that the pipeline is always reaped by its own parent (this script) before
// anything else of the group is killed:
// - the line `stop` on stdin (the server cancels the run, times it out or shuts down): SIGTERM to the group, then
//   SIGKILL to the pipeline after the grace period; the outcome is reported as it happened;
// - the end of stdin: the server is gone (stopped, crashed or killed with SIGKILL: the kernel closes its end of the pipe
//   whatever the cause). The same, and once the pipeline has ended, SIGKILL to whatever is left of the group, this
//   script included: nothing of the run keeps acting.
// SIGTERM, SIGINT and SIGHUP sent to the group reach the pipeline; this script ignores them and reports the outcome.
//
// The pipeline's questions (docs/decisions/pipeline-questions.md): it prints a question line on stdout (read by the
// server), and the server's answer arrives here as the line `answer yes` or `answer no`, written on as `yes` or `no` to
// the pipeline's file descriptor 3 (a pipe; SERVICE_ANSWER_FD names it). Its stdin stays /dev/null: a command of the
// pipeline that reads stdin gets end of file, as it always did. When the server is gone, fd 3 ends too.
// Plain Node, no dependencies: it runs beside the built server and the sources alike.

import { spawn } from 'node:child_process'
import { constants } from 'node:os'

const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP']

function parseArgs(args) {
  let graceMs = 5000
  let i = 0
  for (; i < args.length && args[i] !== '--'; i++) {
    if (args[i] === '--grace-ms' && /^\d+$/.test(args[i + 1] ?? '')) graceMs = Number(args[++i])
    else usage(`unknown argument ${args[i]}`)
  }
  const argv = args.slice(i + 1)
  if (argv.length === 0) usage('no pipeline command after --')
  return { graceMs, argv }
}

function usage(message) {
  process.stderr.write(`supervise.mjs: ${message}\nUsage: supervise.mjs --grace-ms <ms> -- <command> [args...]\n`)
  process.exit(2)
}

const { graceMs, argv } = parseArgs(process.argv.slice(2))
const groups = process.platform !== 'win32'

/** Signals every process of the run: this script's group (it leads it), or only the pipeline where groups do not exist. */
function signalRun(signal) {
  try {
    if (groups) process.kill(-process.pid, signal)
    else child.kill(signal)
  } catch {
    // Nothing left to signal.
  }
}

/** Dies of `signal` as the pipeline did, so the server reports "killed by <signal>"; exits 128 + n where it cannot. */
function dieOf(signal) {
  for (const s of STOP_SIGNALS) process.removeAllListeners(s)
  try {
    process.kill(process.pid, signal)
  } catch {
    // Not a signal this platform can raise: the exit code below says which.
  }
  setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 0)), 200)
}

for (const signal of STOP_SIGNALS) process.on(signal, () => {})

/** null while the run goes on; `asked` once the server asked for a stop; `orphaned` once the server is gone. */
let stopping = null

const ANSWER_FD = 3
const child = spawn(argv[0], argv.slice(1), {
  stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
  env: { ...process.env, SERVICE_ANSWER_FD: String(ANSWER_FD) },
})
const answers = child.stdio[ANSWER_FD]
answers.on('error', () => {}) // the pipeline closed its end, or ended: an answer has nobody to read it

child.on('error', (err) => {
  process.stderr.write(`the pipeline could not start: ${err.message}\n`)
  process.exit(127)
})

child.on('exit', (code, signal) => {
  // The pipeline is reaped: now whatever it left in the group may go, with this script, when the server is gone.
  if (stopping === 'orphaned') signalRun('SIGKILL')
  if (signal) dieOf(signal)
  else process.exit(code ?? 1)
})

function stop(why) {
  if (stopping === null) {
    signalRun('SIGTERM')
    setTimeout(() => child.kill('SIGKILL'), graceMs)
  }
  if (stopping !== 'orphaned') stopping = why
}

/** One line from the server: `stop`, or an answer to the pipeline's question. */
function command(line) {
  if (line === 'stop') stop('asked')
  else if (line === 'answer yes' || line === 'answer no') answers.write(`${line.slice('answer '.length)}\n`)
}

function orphaned() {
  answers.end()
  stop('orphaned')
}

let input = ''
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  input += chunk
  let nl
  while ((nl = input.indexOf('\n')) !== -1) {
    command(input.slice(0, nl))
    input = input.slice(nl + 1)
  }
  input = input.slice(-64) // the server writes short lines: anything longer is not one of them
})
process.stdin.on('end', orphaned)
process.stdin.on('close', orphaned)
process.stdin.on('error', orphaned)
