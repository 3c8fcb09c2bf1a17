/**
 * The pipeline's question protocol (src/deployments/questions.ts): which stdout lines are questions, how they are
 * cleaned and limited, and that every question line gets exactly one answer, in order, with one question asked at a
 * time.
 */
import t from 'tap'
import { ASK_MARKER, MAX_QUESTION, parseAsk, RunQuestions, type PipelineAnswer } from '../../src/deployments/questions.js'

t.test('a marker line is a question; anything else is output', async (t) => {
  t.same(parseAsk(`${ASK_MARKER} Switch traffic?`), { question: 'Switch traffic?' })
  t.same(parseAsk(`${ASK_MARKER}\tSwitch  traffic? `), { question: 'Switch  traffic?' }, 'trimmed, tabs count as the separator')
  t.equal(parseAsk('Switch traffic?'), null)
  t.equal(parseAsk(` ${ASK_MARKER} indented`), null, 'only at the start of the line')
  t.equal(parseAsk(`${ASK_MARKER}ed the user`), null, 'the marker must end at a space')
  t.same(parseAsk(`${ASK_MARKER} a\u001b[31mred\u0007 one\u0085`), { question: 'a[31mred one' }, 'control characters are stripped')
  t.same(parseAsk(ASK_MARKER), { problem: 'the question is empty' })
  t.same(parseAsk(`${ASK_MARKER} \u0001\u0002`), { problem: 'the question is empty' })
  t.same(parseAsk(`${ASK_MARKER} ${'x'.repeat(MAX_QUESTION)}`), { question: 'x'.repeat(MAX_QUESTION) })
  t.same(parseAsk(`${ASK_MARKER} ${'x'.repeat(MAX_QUESTION + 1)}`), { problem: `the question is longer than ${MAX_QUESTION} characters` })
})

/** A run's questions with its log and answers recorded, and the asks it made left for the test to answer. */
function harness(withHook = true) {
  const log: string[] = []
  const answers: boolean[] = []
  const asked: Array<{ question: string; deploymentId: string; answer: (a: PipelineAnswer) => void }> = []
  const questions = new RunQuestions('dep_1', {
    ask: withHook
      ? ({ deploymentId, question }) => new Promise((resolve) => asked.push({ deploymentId, question, answer: resolve }))
      : undefined,
    log: (line) => log.push(line),
    answer: (yes) => answers.push(yes),
  })
  return { log, answers, asked, questions }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

t.test('a question is asked, logged, and its answer written', async (t) => {
  const h = harness()
  t.equal(h.questions.heard('building'), false, 'output is not taken')
  t.equal(h.questions.heard(`${ASK_MARKER} Go?`), true)
  t.same(h.asked.map((a) => [a.deploymentId, a.question]), [['dep_1', 'Go?']])
  t.same(h.log, ['pipeline asks: Go?'])
  await turn()
  t.same(h.answers, [], 'nothing is written before the answer')
  h.asked[0]!.answer({ yes: true, why: 'answered by user u1' })
  await turn()
  t.same(h.answers, [true])
  t.same(h.log, ['pipeline asks: Go?', 'answer: yes (answered by user u1)'])
})

t.test('a second question while one waits is answered no, after the first, and never asked', async (t) => {
  const h = harness()
  h.questions.heard(`${ASK_MARKER} First?`)
  h.questions.heard(`${ASK_MARKER} Second?`)
  h.questions.heard(ASK_MARKER)
  t.equal(h.asked.length, 1, 'only the first is asked')
  t.same(h.log.slice(1), [
    'pipeline error: asked "Second?" while a question waits for its answer; answer: no',
    'pipeline error: a question line that asks nothing (the question is empty); answer: no',
  ])
  await turn()
  t.same(h.answers, [], 'the later answers wait for the first')
  h.asked[0]!.answer({ yes: true, why: 'answered' })
  await turn()
  t.same(h.answers, [true, false, false], 'one answer per question line, in order')
  h.questions.heard(`${ASK_MARKER} Third?`)
  t.equal(h.asked.length, 2, 'once answered, the next question is asked')
})

t.test('without a hook, or when it rejects, the answer is no', async (t) => {
  const h = harness(false)
  h.questions.heard(`${ASK_MARKER} Go?`)
  await turn()
  t.same(h.answers, [false])
  t.same(h.log.at(-1), 'answer: no (nobody can be asked: the run was not started by a tool call)')

  const log: string[] = []
  const answers: boolean[] = []
  const failing = new RunQuestions('dep_2', { ask: () => Promise.reject(new Error('secret detail')), log: (l) => log.push(l), answer: (y) => answers.push(y) })
  failing.heard(`${ASK_MARKER} Go?`)
  await turn()
  t.same(answers, [false])
  t.same(log.at(-1), 'answer: no (the question could not be asked)', 'what the hook threw stays out of the log')
})

t.test('after the run ended, nothing is written or logged, and the hook is told', async (t) => {
  const h = harness()
  let signal: AbortSignal | undefined
  const questions = new RunQuestions('dep_3', {
    ask: (q) => new Promise((resolve) => {
      signal = q.signal
      h.asked.push({ ...q, answer: resolve })
    }),
    log: (line) => h.log.push(line),
    answer: (yes) => h.answers.push(yes),
  })
  h.questions = questions
  h.questions.heard(`${ASK_MARKER} Go?`)
  t.equal(signal?.aborted, false, 'the hook gets a signal, not aborted while the run goes on')
  h.questions.close()
  t.equal(signal?.aborted, true, 'aborted when the run ends')
  h.asked[0]!.answer({ yes: true, why: 'late' })
  await turn()
  t.same(h.answers, [])
  t.same(h.log, ['pipeline asks: Go?'])
})
