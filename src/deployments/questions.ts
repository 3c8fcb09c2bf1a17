/**
 * The yes/no questions a pipeline asks while it runs (docs/decisions/pipeline-questions.md): it prints one line
 * `::service-mcp::ask <question>` on stdout and reads one line, `yes` or `no`, from file descriptor 3
 * (SERVICE_ANSWER_FD). The marker line is not output: the log gets a system line saying what was asked, then one saying
 * the answer and who gave it (or why nobody could). Every marker gets exactly one answer line, in the order asked.
 */

export const ASK_MARKER = '::service-mcp::ask'
/** Longest question, in characters, once control characters are stripped: a question is one line a person reads. */
export const MAX_QUESTION = 500

export interface PipelineQuestion {
  deploymentId: string
  question: string
  /** Aborted when the run ends: a question still waiting then has nobody to tell its answer to. */
  signal: AbortSignal
}

/** The answer the pipeline gets, and why (who answered, or why nobody could), for the run's log. */
export interface PipelineAnswer {
  yes: boolean
  why: string
}

export type AskPipelineQuestion = (question: PipelineQuestion) => Promise<PipelineAnswer>

// C0 and C1 control characters (tabs and escapes included): a question is shown as one plain line.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

/** What an output line asks: null when it is ordinary output, the question, or why the marker line is not one. */
export function parseAsk(line: string): { question: string } | { problem: string } | null {
  if (!line.startsWith(ASK_MARKER)) return null
  const rest = line.slice(ASK_MARKER.length)
  if (rest !== '' && !/^\s/.test(rest)) return null // `::service-mcp::asked…` is output like any other
  const question = rest.replace(CONTROL, '').trim()
  if (question === '') return { problem: 'the question is empty' }
  if (question.length > MAX_QUESTION) return { problem: `the question is longer than ${MAX_QUESTION} characters` }
  return { question }
}

/**
 * One run's questions: hears its stdout lines, asks through `ask` (answered no without one), writes each answer
 * (`answer`) in the order the questions came and logs what happened (`log`). Only one question is asked at a time:
 * a marker while one waits is the pipeline's mistake, answered no once the pending one is answered. Once `close`d (the
 * run ended), nothing more is written or logged.
 */
export class RunQuestions {
  #waiting = false
  readonly #ended = new AbortController()
  /** The answers written so far, in order: each next one is written after it. */
  #written: Promise<void> = Promise.resolve()

  constructor(
    private readonly deploymentId: string,
    private readonly ports: { ask: AskPipelineQuestion | undefined; log(line: string): void; answer(yes: boolean): void },
  ) {}

  /** True when `line` was a question (handled here, not output). */
  heard(line: string): boolean {
    const parsed = parseAsk(line)
    if (parsed === null) return false
    if ('problem' in parsed) {
      this.#log(`pipeline error: a question line that asks nothing (${parsed.problem}); answer: no`)
      this.#queue(Promise.resolve(false))
    } else if (this.#waiting) {
      this.#log(`pipeline error: asked "${parsed.question}" while a question waits for its answer; answer: no`)
      this.#queue(Promise.resolve(false))
    } else {
      this.#log(`pipeline asks: ${parsed.question}`)
      this.#waiting = true
      this.#queue(this.#ask(parsed.question).then((a) => {
        this.#waiting = false
        this.#log(`answer: ${a.yes ? 'yes' : 'no'} (${a.why})`)
        return a.yes
      }))
    }
    return true
  }

  close(): void {
    this.#ended.abort()
  }

  async #ask(question: string): Promise<PipelineAnswer> {
    if (!this.ports.ask) return { yes: false, why: 'nobody can be asked: the run was not started by a tool call' }
    try {
      return await this.ports.ask({ deploymentId: this.deploymentId, question, signal: this.#ended.signal })
    } catch {
      // The hook should not reject (RunListener.onQuestion); if it does, what it says stays out of the run's log.
      return { yes: false, why: 'the question could not be asked' }
    }
  }

  #queue(answer: Promise<boolean>): void {
    this.#written = this.#written.then(() => answer).then((yes) => {
      if (!this.#ended.signal.aborted) this.ports.answer(yes)
    })
  }

  #log(line: string): void {
    if (!this.#ended.signal.aborted) this.ports.log(line)
  }
}
