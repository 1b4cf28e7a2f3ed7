package triggers

// SectionName is the key of the file under which every source of trigger
// work keeps its keys: triggers/webhook its webhooks:, triggers/schedule
// its schedules:, max_per_chat: and min_interval:. Package
// triggers/section puts those parts together as the one section the file
// has, and each source reads its own part back with its FromConfig.
const SectionName = "triggers"
