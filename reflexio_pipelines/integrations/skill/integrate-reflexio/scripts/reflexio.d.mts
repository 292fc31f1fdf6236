// Types of reflexio.mjs for TypeScript agents (copy both files next to each other).

export interface ToolUsed {
  tool_name: string;
  tool_data: { input?: unknown; output?: string; error?: string; [key: string]: unknown };
}

export interface ReflexioOptions {
  /** default: $REFLEXIO_API_URL, else http://127.0.0.1:8081 */
  url?: string;
  /** default: $REFLEXIO_API_KEY */
  apiKey?: string;
  agentVersion?: string;
  /** source label of published turns (default "agent") */
  source?: string;
  /** user id when the agent has none (default $REFLEXIO_USER_ID, else "default-user") */
  defaultUserId?: string;
  topK?: number;
  threshold?: number;
  maxChars?: number;
  timeoutMs?: number;
  logger?: { warn: (message: string) => void };
}

export interface ChatMessage {
  role: string;
  content: unknown;
  [key: string]: unknown;
}

export interface SearchResult {
  profiles?: Array<{ content: string; [key: string]: unknown }>;
  user_playbooks?: Array<{ content: string; trigger?: string | null; [key: string]: unknown }>;
  agent_playbooks?: Array<{ content: string; trigger?: string | null; [key: string]: unknown }>;
}

export declare function renderContext(result: SearchResult, maxChars?: number): string;
export declare function replyText(reply: unknown): string;

export declare class ReflexioHooks {
  constructor(options?: ReflexioOptions);
  sessionFor(userId: string): string;
  context(query: string, options?: { userId?: string }): Promise<string>;
  inject<M extends ChatMessage>(messages: M[], query: string, options?: { userId?: string }): Promise<M[]>;
  inject(messages: string, query: string, options?: { userId?: string }): Promise<string>;
  system(system: unknown, query: string, options?: { userId?: string }): Promise<string>;
  afterTurn<R>(userId: string | undefined, userMessage: string, reply: R,
               options?: { toolsUsed?: ToolUsed[]; sessionId?: string }): Promise<R>;
}
