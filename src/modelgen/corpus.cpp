// The English text the BPE merges are learned from. Written for this project: everyday prose,
// a little dialogue, technical words a chat server sees, numbers and punctuation, so that common
// English (and ChatML/tool-call scaffolding) tokenizes into multi-character tokens.
#include "modelgen/vocab.h"

namespace prefixd::modelgen {

std::string_view training_corpus() {
  return R"corpus(Hello world! Hello, how are you today? I am fine, thank you. And you?
The morning was quiet and cold. A thin fog lay over the river, and the only sound was the
water moving slowly past the old stone bridge. People walked to work with their hands in their
pockets, and the small bakery on the corner had just opened its doors. The smell of fresh bread
drifted down the street, and a few of them stopped to buy something warm for the road.

"Good morning," said the baker. "What would you like today?"
"Two loaves of bread and a cup of coffee, please."
"Of course. That will be four dollars and fifty cents."
"Thank you very much. Have a nice day!"

It is often said that the best way to learn something is to teach it to someone else. When you
explain an idea, you have to understand every part of it, and you quickly find the places where
your own knowledge is weak. Teachers know this well. Students who help each other usually learn
faster than students who work alone, because every question they answer makes the picture a
little clearer.

The weather will change this week. On Monday and Tuesday we expect rain in the north and
strong wind along the coast. From Wednesday the sky should clear, and by the weekend the
temperature will rise to about 24 degrees in the afternoon. Nights will stay cool, around 12
degrees, so bring a jacket if you plan to be outside after sunset.

You are a helpful assistant. The user asks a question and the assistant answers it. If the
question is not clear, the assistant should ask what the user means before giving an answer.
A good answer is short, correct and kind. When the assistant does not know something, it says
so instead of making something up. The system message describes how the assistant should
behave, and the conversation that follows is a list of messages from the user and the
assistant, one after another.

Here is a simple recipe for tomato soup. First, cut two onions and three cloves of garlic and
cook them in olive oil for five minutes. Then add one kilogram of ripe tomatoes, a spoon of
sugar, salt and pepper. Let everything cook for twenty minutes, blend it until smooth, and
serve it hot with a piece of bread. Some people like to add cream or fresh basil at the end.

A computer program is a list of instructions that a machine can follow. Programs read input,
process data and write output. A function takes some arguments and returns a value. When a
function calls itself, we say that it is recursive. Good code is easy to read: the names of
variables and functions explain what they hold and what they do, and comments explain why the
code was written the way it was, not what each line does.

The server receives a request, checks that it is valid, and sends back a response. If the
request is wrong, the server returns an error with a message that explains the problem. A cache
keeps the results of earlier work so that the same work does not have to be done twice. When
the cache is full, the oldest or least used entries are removed to make room for new ones. A
model that generates text reads a prompt, turns it into tokens, and then predicts the next
token, one at a time, until it reaches the end or the maximum number of tokens.

My grandmother lived in a small house at the edge of the village. Every summer we visited her,
and every summer she told the same stories: how she met my grandfather at a dance, how the
winter of 1963 was so cold that the lake froze for three months, and how she learned to drive
when she was already sixty years old. We never got tired of hearing them. She had a garden full
of apples, pears and plums, and in the evening we sat under the trees and watched the stars.

Why do leaves change color in autumn? During spring and summer, leaves are green because they
contain chlorophyll, which plants use to make food from sunlight. As the days get shorter and
colder, trees stop producing chlorophyll, and the green fades away. Other colors that were there
all along, yellow and orange, become visible. Some trees also produce red pigments, which is why
a forest in October can look like it is on fire.

Question: What is the capital of France?
Answer: The capital of France is Paris.
Question: How many days are there in a year?
Answer: There are 365 days in a normal year and 366 days in a leap year.
Question: Can you write a short poem about the sea?
Answer: The sea is wide, the sea is deep, it sings the sailors off to sleep.

To call a function, the assistant writes a JSON object with the name of the function and its
arguments, for example {"name": "get_weather", "arguments": {"city": "London", "unit": "celsius"}}.
The result of the tool comes back in a message with the role "tool", and the assistant then uses
it to write the final answer for the user. Tools can search the web, read files, run code, send
emails or look up the time in another part of the world.

There are many ways to travel between two cities. The train is comfortable and you can read or
work during the journey. The bus is cheaper but slower. A car gives you freedom to stop wherever
you want, but you have to find a place to park. Flying is the fastest way to cover long
distances, although the time spent at the airport often makes short flights less useful than
they seem.

The history of writing goes back more than five thousand years. The first systems used small
pictures to stand for things and ideas. Over time these pictures became simpler, and some of
them began to stand for sounds instead of words. An alphabet with a letter for each sound made
reading and writing much easier to learn, and that is one of the reasons why it spread so widely.

Please remember to close the window before you leave. The keys are on the table next to the
door, and there is some food in the fridge if you get hungry. I will be back around seven
o'clock. If anything happens, call me on my phone. Don't forget to feed the cat! She'll be
waiting for you in the kitchen, and she's always hungry in the evening. We've talked about this
before, haven't we? I'd be very happy if you could also water the plants.

Numbers appear everywhere: 1, 2, 3, 10, 42, 100, 2024, 3.14, 0.5 and 1000000. A price might be
$19.99, a date might be 2025-06-01, and a time might be 08:30. Lists often look like this:
1. Open the file.
2. Read each line.
3. Count the words.
4. Print the result.

Learning a new language takes time and patience. At first, every sentence feels like a puzzle,
and you have to think about each word. After a few months, simple conversations start to flow,
and one day you notice that you understood a whole film without reading the subtitles. The most
important thing is to practice a little every day, to listen a lot, and not to be afraid of
making mistakes, because mistakes are how everyone learns.

In the end, the story was not about the treasure at all. It was about the friends who searched
for it together, the long nights around the fire, the maps they drew and lost, and the small
kindnesses they showed each other along the way. When they finally opened the old wooden box,
it was empty, and they laughed until their sides hurt, because they had already found what they
were looking for.
Science begins with curiosity. An astronomer points a telescope at a distant galaxy and measures
how its light has shifted toward red; a biologist counts the bacteria growing in a dish; a chemist
mixes two liquids and records the temperature. Each experiment tests a hypothesis, and a good
hypothesis makes predictions that could turn out to be wrong. Observations that agree with many
predictions slowly become a theory, which scientists keep refining as better instruments arrive.

The orchestra tuned its instruments while the audience found their seats. Violins, cellos and
flutes filled the hall with scattered notes, then fell silent as the conductor raised her baton.
The symphony opened softly, almost a whisper, before the drums and trumpets joined in with a
thunderous melody. Music has a strange power: a familiar song can bring back memories of a
childhood kitchen, a summer festival, or a friend we have not seen for decades.

Football, basketball, tennis and cricket attract millions of fans around the globe. Athletes
train for years, practicing the same movements thousands of times until they become automatic.
Coaches analyze statistics, study videos of opponents, and design strategies for every match.
Yet sport remains unpredictable: an underdog team scores in the final minute, a champion slips
on wet grass, and the whole stadium erupts in celebration or disappointment.

Doctors recommend regular exercise, enough sleep and a balanced diet with vegetables, fruit,
whole grains and protein. Walking thirty minutes a day strengthens the heart and improves mood.
Drinking water instead of sugary beverages protects teeth and reduces the risk of diabetes.
Hospitals rely on nurses, surgeons, pharmacists and technicians working together; patients
recover faster when their treatment is explained clearly and their questions are answered.

Geography shapes history. Mountains protected valleys from invaders, rivers carried goods to
distant markets, and natural harbors grew into busy ports. Deserts such as the Sahara cover huge
regions with very little rainfall, while tropical rainforests along the equator receive storms
almost every afternoon. Islands, peninsulas, glaciers, volcanoes and canyons each tell a story
about the slow forces that build and erode the surface of our planet.

Economists study how households, companies and governments make decisions about scarce
resources. When demand for a product increases and supply stays the same, prices usually rise.
Central banks adjust interest rates to control inflation, and governments collect taxes to pay
for schools, roads, hospitals and pensions. Markets can be efficient, but they also experience
bubbles, panics and crashes that affect ordinary families and their savings.

In software engineering, a database stores records in tables, and a query selects the rows that
match certain conditions. An index makes searching faster at the cost of extra storage. Network
protocols define how messages travel between clients and servers; encryption keeps passwords and
payments private. Developers write unit tests, integration tests and benchmarks, review each
other's changes, and deploy new versions automatically through continuous integration pipelines.
Threads, queues, locks, buffers, streams, sockets, pointers, arrays, strings, vectors, objects,
classes, interfaces, modules, packages, libraries, compilers, interpreters and debuggers are
everyday vocabulary for programmers. A scheduler decides which task runs next; a tokenizer splits
text into tokens; a parser builds a syntax tree; an allocator hands out memory and reclaims it.

The farmer woke before dawn to milk the cows and feed the chickens. Wheat, barley, corn and
potatoes grew in the fields beyond the barn, and a tractor waited beside the fence. During the
harvest, neighbors helped each other gather crops before autumn storms arrived. In the evenings,
families shared simple meals of soup, cheese, eggs and bread baked in the village oven.

Photography changed how people remember their lives. Early cameras required long exposures, so
subjects had to sit perfectly still. Later, film became cheaper and smaller, and eventually
digital sensors replaced film entirely. Today almost everyone carries a camera in their pocket,
capturing birthdays, weddings, sunsets, pets, breakfasts and street scenes every single day.

Architecture combines engineering with art. Ancient builders raised pyramids, temples and
cathedrals using stone, wood and enormous human effort. Modern skyscrapers rely on steel frames,
reinforced concrete and glass facades, with elevators that carry thousands of people every hour.
Good buildings respond to climate: thick walls keep interiors cool in hot countries, while large
windows collect sunshine in northern cities during long, dark winters.

Children learn through play. Building towers from blocks teaches balance and patience; drawing
pictures develops imagination; playing games with rules teaches fairness and cooperation. Parents
and teachers encourage curiosity by asking open questions: What do you think will happen? Why did
that happen? How could we find out? Reading bedtime stories together builds vocabulary and
creates warm memories that last a lifetime.

The spaceship drifted silently above the blue planet. Inside, the crew checked oxygen levels,
repaired a broken antenna and prepared experiments on plant growth in microgravity. Through the
small round window they watched hurricanes spinning over the ocean and city lights glittering
across continents at night. Returning astronauts often describe feeling that national borders
look meaningless from orbit, and that the atmosphere seems surprisingly thin and fragile.

Volunteers organized a cleanup along the beach on Saturday morning. They collected plastic
bottles, fishing nets, aluminum cans and cigarette filters, sorting everything into recycling
bags. Local businesses donated gloves, sandwiches and lemonade. By noon the shoreline looked
transformed, and several participants promised to return next month with friends, cousins and
classmates.

Mathematics describes patterns. Addition, subtraction, multiplication and division are the first
operations children master; later come fractions, equations, geometry, probability and calculus.
A triangle has three angles that add up to one hundred and eighty degrees. Prime numbers can only
be divided by one and themselves. Statistics helps us reason about uncertainty, estimating
averages, variances and correlations from samples instead of entire populations.

Dear customer, thank you for your order. Your package has been shipped and should arrive within
three to five business days. You can track the delivery using the link in this email. If you
have any questions about billing, returns or exchanges, please contact our support team, which is
available Monday through Friday. We appreciate your business and hope you enjoy your purchase.

Translation requires more than replacing words. Idioms, jokes, politeness, rhythm and cultural
references rarely survive a literal approach. A skilled translator understands both languages
deeply and chooses expressions that create the same effect for new readers. Dictionaries,
glossaries and software tools help, but careful human judgment remains essential for poetry,
contracts, medical instructions and novels.
)corpus";
}

}  // namespace prefixd::modelgen
