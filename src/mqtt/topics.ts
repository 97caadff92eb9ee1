// MQTT topic grammar of the messaging domain: m/<workspace_id>/c/<channel_id>[/<subtopic>] for publish,
// and subscription filters whose wildcards stay inside one channel.
import { subtopicProblem } from '../messaging/subtopic.js';
import { isUuid } from '../validate.js';

export interface ChannelTopic {
  workspaceId: string;
  channelId: string;
  /** The levels after the channel joined with '/', or null when there are none. */
  subtopic: string | null;
}

/**
 * A publish topic, or null when it is not a channel topic or its subtopic breaks the messaging rule
 * (wildcards are refused by aedes before this).
 */
export function parsePublishTopic(topic: string): ChannelTopic | null {
  const levels = topic.split('/');
  if (levels.length < 4 || levels[0] !== 'm' || levels[2] !== 'c') return null;
  const [, workspaceId, , channelId] = levels as [string, string, string, string];
  if (!isUuid(workspaceId) || !isUuid(channelId)) return null;
  const rest = levels.slice(4);
  if (subtopicProblem(rest) !== null) return null;
  return { workspaceId, channelId, subtopic: rest.length ? rest.join('/') : null };
}

/**
 * The channel a subscription filter stays within, or null. Workspace and channel must be literal ids:
 * `+` or `#` there would reach channels the device was never authorised for, so only the levels after
 * the channel may hold wildcards (`m/<ws>/c/<ch>/#` also matches the channel topic itself).
 */
export function parseSubscribeFilter(filter: string): ChannelTopic | null {
  const levels = filter.split('/');
  if (levels.length < 4 || levels[0] !== 'm' || levels[2] !== 'c') return null;
  const [, workspaceId, , channelId] = levels as [string, string, string, string];
  if (!isUuid(workspaceId) || !isUuid(channelId)) return null;
  const rest = levels.slice(4);
  for (let i = 0; i < rest.length; i++) {
    const l = rest[i] as string;
    if (l === '#' && i !== rest.length - 1) return null;
    if (l !== '#' && l !== '+' && (l === '' || l.includes('#') || l.includes('+'))) return null;
    // A literal level obeys the publish rule: '.' and '..' name no subtopic (src/messaging/subtopic.ts).
    if (l === '.' || l === '..') return null;
  }
  return { workspaceId, channelId, subtopic: rest.length ? rest.join('/') : null };
}

export function channelTopic(workspaceId: string, channelId: string, subtopic: string | null): string {
  return subtopic ? `m/${workspaceId}/c/${channelId}/${subtopic}` : `m/${workspaceId}/c/${channelId}`;
}

/** Whether a topic matches a subscription filter (MQTT 3.1.1 4.7: `+` one level, `#` the rest, itself included). */
export function filterMatches(filter: string, topic: string): boolean {
  const f = filter.split('/');
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length || (f[i] !== '+' && f[i] !== t[i])) return false;
  }
  return f.length === t.length;
}
