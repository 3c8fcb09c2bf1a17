import type { InputRequests, InputResponses } from '../../mcp/input-requests.js'

/** What one ask came to: the checked answers, and whether this very request gave them (false: replayed from a sealed round). */
export interface Asked<R extends InputRequests> {
  answers: InputResponses<R>
  fresh: boolean
}
